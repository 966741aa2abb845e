"""The beginner's original training code, kept verbatim as the reference for the `seed` mode.

One sample at a time, column vectors, helper functions that recompute the forward function,
softmax + squared error, and a softmax derivative that keeps only the diagonal of the Jacobian.
Do not "fix" anything here: the `seed` mode must reproduce exactly this, bug included.
"""

import torch


def sigmoid(x):
    return 1 / (1 + torch.exp(-x))


def dsigmoid(x):
    return sigmoid(x) * (1 - sigmoid(x))


def softmax(x):
    return torch.exp(x) / torch.sum(torch.exp(x))


def dsoftmax(x):
    return softmax(x) * (1 - softmax(x))


def forward(x, W1, b1, W2, b2, W3, b3):
    z1 = W1 @ x + b1
    a1 = sigmoid(z1)
    z2 = W2 @ a1 + b2
    a2 = sigmoid(z2)
    z3 = W3 @ a2 + b3
    out = softmax(z3)
    return z1, a1, z2, a2, z3, out


def train_step(x, label, W1, b1, W2, b2, W3, b3, lr):
    target = torch.zeros(10)
    target[label] = 1
    z1, a1, z2, a2, z3, out = forward(x, W1, b1, W2, b2, W3, b3)
    error = 2 * (out - target)
    d3 = error * dsoftmax(z3)
    d2 = (W3.T @ d3) * dsigmoid(z2)
    d1 = (W2.T @ d2) * dsigmoid(z1)
    W3 = W3 - lr * torch.outer(d3, a2)
    b3 = b3 - lr * d3
    W2 = W2 - lr * torch.outer(d2, a1)
    b2 = b2 - lr * d2
    W1 = W1 - lr * torch.outer(d1, x)
    b1 = b1 - lr * d1
    out = forward(x, W1, b1, W2, b2, W3, b3)[-1]
    loss = torch.sum((out - target) ** 2)
    return W1, b1, W2, b2, W3, b3, loss.item()

"""Steps 1 and 2, the data: MNIST downloaded and checked (download_mnist), preloaded as tensors with
the cost of copying them to each device (preload), and a small learnable stand-in for tests (synthetic).
"""

"""K copies of a network trained together (`models_at_once`) by the modes that train an nn.Module
(`module`, `compiled`, `cudagraph`)."""

import copy

import torch

from mnistbench.config import networks
from mnistbench.train import nets
from mnistbench.train.needs import Unsupported


class Stacked:
    """K copies of a module trained together the way PyTorch's model-ensembling tutorial does it:
    their parameters stacked (torch.func.stack_module_state), one module's forward run on each
    copy's (functional_call), and the gradient of every copy's loss in one call (vmap of grad)."""

    def __init__(self, s: networks.Spec, state: dict, device, criterion, models_at_once: int):
        each = [nets.module(s, c, device) for c in nets.copies(state, models_at_once)]
        params, buffers = torch.func.stack_module_state(each)
        if buffers:
            raise Unsupported(
                f"{s.network.name} keeps buffers ({', '.join(list(buffers)[:3])}): running statistics, which "
                "vmap cannot update for each copy; train it with models_at_once 1"
            )
        self.params, self.names = params, nets.state_names(s, each[0])
        base = copy.deepcopy(each[0]).to("meta")  # the forward's code; the weights are the copies'

        def loss(p, x, y):
            return criterion(torch.func.functional_call(base, p, (x,)), y)

        self.grads = torch.func.vmap(torch.func.grad(loss), in_dims=(0, None, None))

    def backward(self, x, y):
        for k, g in self.grads(self.params, x, y).items():
            self.params[k].grad = g

    def state(self) -> dict:
        return {self.names[k]: v.detach() for k, v in self.params.items()}

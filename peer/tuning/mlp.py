"""A small multilayer perceptron and Adam, in numpy, for the tuner's PPO.

The networks are tiny (tens of inputs, two hidden layers of 32 to 64
units), so numpy on one core evaluates and trains them in microseconds per
row; no framework is needed and ``import gleam.peer`` never pulls in torch.
Parameters live in one flat float64 vector so that saving, loading and the
optimizer handle a network as a single array.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]


@dataclass(frozen=True)
class _Layer:
    w: slice  # into the flat parameter vector, shape (fan_in, fan_out)
    b: slice
    fan_in: int
    fan_out: int


class MLP:
    """Fully connected network: tanh hidden layers, linear output.

    ``forward`` keeps what ``backward`` needs; a network therefore serves one
    forward/backward pair at a time (the tuner is single-threaded).
    """

    def __init__(self, sizes: Sequence[int], params: Array | None = None) -> None:
        if len(sizes) < 2:
            raise ValueError("an MLP needs at least an input and an output size")
        self.sizes = tuple(int(s) for s in sizes)
        layers = []
        offset = 0
        for fan_in, fan_out in zip(self.sizes[:-1], self.sizes[1:], strict=True):
            w = slice(offset, offset + fan_in * fan_out)
            offset = w.stop
            b = slice(offset, offset + fan_out)
            offset = b.stop
            layers.append(_Layer(w, b, fan_in, fan_out))
        self._layers = tuple(layers)
        self.size = offset
        if params is None:
            params = np.zeros(offset)
        if params.shape != (offset,):
            raise ValueError(f"expected {offset} parameters for sizes {self.sizes}, "
                             f"got {params.shape}")
        self.params = np.asarray(params, dtype=np.float64).copy()
        self._cache: list[Array] = []

    @classmethod
    def initialized(
        cls, sizes: Sequence[int], rng: np.random.Generator, out_gain: float = 1.0
    ) -> MLP:
        """Orthogonal weights (gain sqrt 2 hidden, ``out_gain`` on the output), zero biases."""
        net = cls(sizes)
        last = len(net._layers) - 1
        for n, layer in enumerate(net._layers):
            gain = out_gain if n == last else np.sqrt(2.0)
            a = rng.standard_normal((max(layer.fan_in, layer.fan_out),) * 2)
            q, r = np.linalg.qr(a)
            q = q * np.sign(np.diag(r))
            w = q[: layer.fan_in, : layer.fan_out] * gain
            net.params[layer.w] = w.ravel()
        return net

    def _w(self, layer: _Layer) -> Array:
        return self.params[layer.w].reshape(layer.fan_in, layer.fan_out)

    def forward(self, x: Array) -> Array:
        """Outputs for the rows of ``x`` (shape ``(rows, sizes[0])``)."""
        self._cache = [x]
        h = x
        last = len(self._layers) - 1
        for n, layer in enumerate(self._layers):
            h = h @ self._w(layer) + self.params[layer.b]
            if n != last:
                h = np.tanh(h)
            self._cache.append(h)
        return h

    def backward(self, grad_out: Array) -> Array:
        """Gradient of a loss with respect to the parameters, given d loss / d output
        for the rows of the last ``forward``."""
        grad = np.zeros_like(self.params)
        delta = grad_out
        for n in range(len(self._layers) - 1, -1, -1):
            layer = self._layers[n]
            inp = self._cache[n]
            grad[layer.w] = (inp.T @ delta).ravel()
            grad[layer.b] = delta.sum(axis=0)
            if n:
                delta = (delta @ self._w(layer).T) * (1.0 - self._cache[n] ** 2)
        return grad


class Adam:
    """Adam over a flat parameter vector, with global gradient-norm clipping."""

    def __init__(
        self, size: int, lr: float = 3e-4, betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8, max_grad_norm: float = 0.5,
    ) -> None:
        self.lr = lr
        self.beta1, self.beta2 = betas
        self.eps = eps
        self.max_grad_norm = max_grad_norm
        self.m = np.zeros(size)
        self.v = np.zeros(size)
        self.t = 0

    def step(self, params: Array, grad: Array) -> None:
        """Update ``params`` in place to decrease the loss whose gradient is ``grad``."""
        norm = float(np.linalg.norm(grad))
        if self.max_grad_norm and norm > self.max_grad_norm:
            grad = grad * (self.max_grad_norm / norm)
        self.t += 1
        self.m = self.beta1 * self.m + (1 - self.beta1) * grad
        self.v = self.beta2 * self.v + (1 - self.beta2) * grad * grad
        m_hat = self.m / (1 - self.beta1**self.t)
        v_hat = self.v / (1 - self.beta2**self.t)
        params -= self.lr * m_hat / (np.sqrt(v_hat) + self.eps)

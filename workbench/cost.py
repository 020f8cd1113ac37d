"""The traffic and arithmetic an op must do (its cost model), in bytes and FLOPs."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Cost:
    """Ideal cost of one call: each input read once, each output written once.

    bytes_read, bytes_written: bytes through device memory (HBM) at the ideal;
    flops: floating-point operations (a multiply-add is 2);
    bytes_moved_est: what the implementation's kernels really move by the cost model
      (e.g. the manual softmax's ~8MN elements); equals bytes_read + bytes_written for fused forms.
    """

    bytes_read: int
    bytes_written: int
    flops: int
    bytes_moved_est: int | None = None

    @property
    def bytes(self) -> int:
        """Ideal bytes: read + written."""
        return self.bytes_read + self.bytes_written

    @property
    def moved(self) -> int:
        """Estimated real bytes moved (ideal bytes where the implementation is fused)."""
        return self.bytes if self.bytes_moved_est is None else self.bytes_moved_est

    @property
    def intensity(self) -> float | None:
        """Arithmetic intensity, FLOPs per ideal byte; None for a zero-byte op."""
        return self.flops / self.bytes if self.bytes else None

"""Errors raised by the core. Each names the bad value and what is allowed."""


class WorkbenchError(ValueError):
    """Base class: a user-facing error with one clear line of text."""


class UnknownNameError(WorkbenchError):
    """An op, implementation, dtype or parameter name that is not registered.

    The message names the bad value and lists the allowed ones.
    """

    def __init__(self, what: str, value: object, allowed: "list[str] | tuple[str, ...]"):
        self.what, self.value, self.allowed = what, value, tuple(allowed)
        super().__init__(f"unknown {what} {value!r}; allowed: {', '.join(map(str, allowed)) or '(none)'}")


class SpecError(WorkbenchError):
    """A shape or dtype that the op cannot take (names the field, value and rule)."""


class UnavailableError(WorkbenchError):
    """An implementation that cannot run here; the message says why (no GPU, no nvcc, ...)."""


class LimitError(WorkbenchError):
    """A kernel limit was hit (e.g. a row too long for one Triton block).

    The message names the limit, the value and the parameter or variant to use instead.
    """

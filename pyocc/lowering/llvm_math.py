"""Scalar arithmetic in llvmlite IR that every kernel pyocc writes shares:
the CUDA kernels (pyocc.lowering.cuda_kernels: PTX and their host twins)
and the host's native kernels (pyocc.lowering.native).

`ScalarMath` computes float32 functions in one flavour: `ptx` (NVVM's
ex2/lg2 approximations, about 2 ulp) or `host` (LLVM intrinsics that lower
to libm's expf, logf, tanhf, powf). `unary_expression`,
`binary_expression` and `integer_expression` build ONNX's elementwise
functions from it; `row_major_strides` and `broadcast_strides` are the
index arithmetic of numpy broadcasting; `declared_function` gets or
declares a function of a module. Erf is the Abramowitz-Stegun
7.1.26 polynomial (|error| < 1.5e-7) in both flavours.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import llvmlite.ir as ir

#: unary functions the kernels compute (x -> y), with their parameters alpha/beta
UNARY_FUNCTIONS = frozenset({
    "identity", "neg", "abs", "exp", "log", "sqrt", "reciprocal", "floor", "ceil", "relu", "leaky_relu",
    "sigmoid", "tanh", "hard_sigmoid", "hard_swish", "clip", "erf", "gelu",
})
#: float32 functions the host computes with libm (llvm.sin/llvm.cos) and ptx has no form of yet:
#: the rotary tables of a LLaMA-style model, computed at run time rather than folded
HOST_UNARY_FUNCTIONS = frozenset({"sin", "cos"})
BINARY_FUNCTIONS = frozenset({"add", "sub", "mul", "div", "max", "min", "pow"})
#: what the kernels compute on int32 / int64 tensors (div truncates toward zero, as onnxruntime)
INTEGER_FUNCTIONS = frozenset({"add", "sub", "mul", "div", "max", "min", "neg", "abs", "relu", "identity"})
#: comparisons (of floats or integers): their result is one byte per element (numpy's bool)
COMPARISONS: dict[str, str] = {"equal": "==", "less": "<", "greater": ">", "less_or_equal": "<=",
                               "greater_or_equal": ">="}
#: logic on bools (one byte per element, nonzero is true)
LOGICAL = frozenset({"and", "or", "xor", "not"})


def declared_function(module: ir.Module, name: str, signature: ir.FunctionType) -> ir.Function:
    """The module's function `name`, declared with `signature` when the
    module has none yet (the one function, however many emitters ask)."""
    existing = module.globals.get(name)
    if isinstance(existing, ir.Function):
        return existing
    return ir.Function(module, signature, name)


def row_major_strides(shape: Sequence[int]) -> list[int]:
    """The element strides of a contiguous row-major tensor of `shape`."""
    return [math.prod(shape[axis + 1:]) for axis in range(len(shape))]


def broadcast_strides(shape: Sequence[int], out_shape: Sequence[int]) -> tuple[int, ...]:
    """Element strides of an input of `shape` read at every index of
    `out_shape` (numpy broadcasting, 0 along broadcast dimensions)."""
    shape = [1] * (len(out_shape) - len(shape)) + list(shape)
    strides = [0] * len(shape)
    step = 1
    for axis in range(len(shape) - 1, -1, -1):
        strides[axis] = 0 if shape[axis] == 1 and out_shape[axis] != 1 else step
        step *= shape[axis]
    return tuple(strides)


class ScalarMath:
    """Float arithmetic in one flavour: `ptx` (NVVM approximations) or
    `host` (LLVM intrinsics that lower to libm's correctly rounded-ish
    expf, logf, tanhf, powf: what numpy computes too)."""

    def __init__(self, builder: object, module: object, flavour: str):
        """Emit with `builder` into llvmlite `module` in `flavour` (ptx or host)."""
        self.ir = ir
        self.b = builder
        self.module = module
        self.flavour = flavour
        self.f32 = ir.FloatType()

    def const(self, value: float) -> object:
        """A float32 constant."""
        return self.ir.Constant(self.f32, value)

    def intrinsic(self, name: str, *args: object) -> object:
        """Call the float32 function `name` (an LLVM intrinsic such as
        llvm.copysign.f32), declared in the module on first use."""
        ir = self.ir
        function = self.module.globals.get(name)
        if function is None:
            function = ir.Function(self.module, ir.FunctionType(self.f32, [self.f32] * len(args)), name)
        return self.b.call(function, list(args))

    def exp2(self, x: object) -> object:
        """2 ** x."""
        return self.intrinsic("llvm.nvvm.ex2.approx.f" if self.flavour == "ptx" else "llvm.exp2.f32", x)

    def log2(self, x: object) -> object:
        """log2(x)."""
        return self.intrinsic("llvm.nvvm.lg2.approx.f" if self.flavour == "ptx" else "llvm.log2.f32", x)

    def exp(self, x: object) -> object:
        """e ** x."""
        if self.flavour == "host":
            return self.intrinsic("llvm.exp.f32", x)
        return self.exp2(self.b.fmul(x, self.const(1.0 / math.log(2.0))))

    def log(self, x: object) -> object:
        """The natural logarithm."""
        if self.flavour == "host":
            return self.intrinsic("llvm.log.f32", x)
        return self.b.fmul(self.log2(x), self.const(math.log(2.0)))

    def sqrt(self, x: object) -> object:
        """The square root (llvm.sqrt)."""
        return self.intrinsic("llvm.sqrt.f32", x)

    def fabs(self, x: object) -> object:
        """|x|."""
        return self.intrinsic("llvm.fabs.f32", x)

    def floor(self, x: object) -> object:
        """Round down."""
        return self.intrinsic("llvm.floor.f32", x)

    def ceil(self, x: object) -> object:
        """Round up."""
        return self.intrinsic("llvm.ceil.f32", x)

    def pow(self, x: object, y: object) -> object:
        """x ** y as exp2(y * log2|x|), with the sign of an odd integer power
        of a negative x (NaN for a fractional one) and x ** 0 = 1; on the
        host libm's powf, which does the same."""
        if self.flavour == "host":
            return self.intrinsic("llvm.pow.f32", x, y)
        b = self.b
        magnitude = self.exp2(b.fmul(y, self.log2(self.fabs(x))))
        whole = b.fcmp_ordered("==", self.floor(y), y)
        half = b.fmul(y, self.const(0.5))
        odd = b.and_(whole, b.fcmp_ordered("!=", self.floor(half), half))
        negative = b.fcmp_ordered("<", x, self.const(0.0))
        signed = self.select(odd, b.fneg(magnitude), magnitude)
        result = self.select(negative, self.select(whole, signed, self.const(math.nan)), magnitude)
        return self.select(b.fcmp_ordered("==", y, self.const(0.0)), self.const(1.0), result)

    def select(self, condition: object, a: object, b: object) -> object:
        """a if condition else b."""
        return self.b.select(condition, a, b)

    def max(self, a: object, b: object) -> object:
        """a if a > b else b (b when either is NaN)."""
        return self.select(self.b.fcmp_ordered(">", a, b), a, b)

    def min(self, a: object, b: object) -> object:
        """a if a < b else b (b when either is NaN)."""
        return self.select(self.b.fcmp_ordered("<", a, b), a, b)

    def sigmoid(self, x: object) -> object:
        """1 / (1 + e ** -x)."""
        b = self.b
        return b.fdiv(self.const(1.0), b.fadd(self.const(1.0), self.exp(b.fneg(x))))

    def tanh(self, x: object) -> object:
        """The hyperbolic tangent."""
        if self.flavour == "host":
            return self.intrinsic("llvm.tanh.f32", x)
        # tanh x = 1 - 2 / (exp(2x) + 1): exact limits at +-inf
        b = self.b
        return b.fsub(self.const(1.0), b.fdiv(self.const(2.0), b.fadd(self.exp(b.fmul(x, self.const(2.0))),
                                                                      self.const(1.0))))

    def erf(self, x: object) -> object:
        """Abramowitz-Stegun 7.1.26 on |x|, with erf's sign."""
        b = self.b
        ax = self.fabs(x)
        t = b.fdiv(self.const(1.0), b.fadd(self.const(1.0), b.fmul(self.const(0.3275911), ax)))
        poly = self.const(1.061405429)
        for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
            poly = b.fadd(b.fmul(poly, t), self.const(c))
        poly = b.fmul(poly, t)
        y = b.fsub(self.const(1.0), b.fmul(poly, self.exp(b.fneg(b.fmul(ax, ax)))))
        return self.select(b.fcmp_ordered("<", x, self.const(0.0)), b.fneg(y), y)


def unary_expression(m: ScalarMath, fn: str, x: object, alpha: float | None, beta: float | None,
                     approximate: str) -> object:
    """fn(x) for a float32 `x` (UNARY_FUNCTIONS; alpha/beta None: ONNX's
    defaults), with the semantics of pyocc.runtime.kernels.elementwise.unary."""
    b = m.b
    match fn:
        case "identity":
            return x
        case "neg":
            return b.fneg(x)
        case "abs":
            return m.fabs(x)
        case "exp":
            return m.exp(x)
        case "log":
            return m.log(x)
        case "sqrt":
            return m.sqrt(x)
        case "reciprocal":
            return b.fdiv(m.const(1.0), x)
        case "floor":
            return m.floor(x)
        case "ceil":
            return m.ceil(x)
        case "relu":
            return m.max(x, m.const(0.0))
        case "leaky_relu":
            slope = 0.01 if alpha is None else alpha
            return m.select(b.fcmp_ordered(">=", x, m.const(0.0)), x, b.fmul(x, m.const(slope)))
        case "sigmoid":
            return m.sigmoid(x)
        case "tanh":
            return m.tanh(x)
        case "hard_sigmoid":
            a, c = (0.2 if alpha is None else alpha), (0.5 if beta is None else beta)
            return m.min(m.max(b.fadd(b.fmul(x, m.const(a)), m.const(c)), m.const(0.0)), m.const(1.0))
        case "hard_swish":
            gate = m.min(m.max(b.fadd(b.fmul(x, m.const(1.0 / 6.0)), m.const(0.5)), m.const(0.0)), m.const(1.0))
            return b.fmul(x, gate)
        case "clip":
            y = x if alpha is None else m.max(x, m.const(alpha))
            return y if beta is None else m.min(y, m.const(beta))
        case "erf":
            return m.erf(x)
        case "sin" | "cos" if m.flavour == "host":
            return m.intrinsic(f"llvm.{fn}.f32", x)
        case "gelu":
            if approximate == "tanh":
                inner = b.fmul(m.const(math.sqrt(2.0 / math.pi)),
                               b.fadd(x, b.fmul(m.const(0.044715), b.fmul(x, b.fmul(x, x)))))
                gate = b.fadd(m.const(1.0), m.tanh(inner))
            else:
                gate = b.fadd(m.const(1.0), m.erf(b.fmul(x, m.const(1.0 / math.sqrt(2.0)))))
            return b.fmul(b.fmul(x, m.const(0.5)), gate)
    raise ValueError(f"no pointwise kernel computes {fn!r}")


def binary_expression(m: ScalarMath, fn: str, a: object, c: object) -> object:
    """fn(a, c) for float32 values (BINARY_FUNCTIONS)."""
    b = m.b
    operations: dict[str, Callable[[object, object], object]] = {
        "add": b.fadd, "sub": b.fsub, "mul": b.fmul, "div": b.fdiv, "max": m.max, "min": m.min, "pow": m.pow}
    return operations[fn](a, c)


def integer_expression(m: ScalarMath, fn: str, values: Sequence[object]) -> object:
    """fn on signed integers (INTEGER_FUNCTIONS; div truncates toward zero)."""
    b = m.b
    a = values[0]
    zero = m.ir.Constant(a.type, 0)
    match fn:
        case "add" | "sub" | "mul" | "div":
            return {"add": b.add, "sub": b.sub, "mul": b.mul, "div": b.sdiv}[fn](a, values[1])
        case "max" | "min":
            return b.select(b.icmp_signed(">" if fn == "max" else "<", a, values[1]), a, values[1])
        case "neg":
            return b.neg(a)
        case "abs":
            return b.select(b.icmp_signed("<", a, zero), b.neg(a), a)
        case "relu":
            return b.select(b.icmp_signed("<", a, zero), zero, a)
        case "identity":
            return a
    raise ValueError(f"no integer kernel computes {fn!r}")


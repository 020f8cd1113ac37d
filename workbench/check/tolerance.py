"""The check's tolerances (MEASUREMENT.md rule 6): from the dtype's rounding, never growing to 1.

Two gates, both required (workbench.check.compare):
- elementwise: |out - ref| <= atol + rtol * |ref|, where atol = atol_rms * rms(ref) + atol_floor;
- norm-wise: ||out - ref|| / ||ref|| <= norm_rtol.

The terms, in units of a unit roundoff u (half an ulp: bfloat16 2^-8, float16 2^-11, float32
2^-24, TF32 inputs 2^-11, float8_e4m3fn 2^-4, float8_e5m2 2^-3):
- rounding to the output dtype: OUT_ULPS * u_out relative (a correctly rounded result is within
  1 u; the unfused `manual` forms round once per operator and declare a factor of their own);
- the float32 arithmetic inside every kernel (all of them compute in float32, half precision
  included): WORK_ULPS * u_f32 relative, and WORK_ULPS * u_f32 * rms(ref) absolute, because a
  cancellation (1 + tanh(a) for a << 0 in GeLU) loses digits against the operands, not the result;
- matmul-like ops (a K-term float32 sum): ACCUMULATION_ULPS * u_f32 * sqrt(K) * rms(ref)
  absolute, in both gates. With unit-variance inputs the partial sums grow like sqrt(k), so the
  summed rounding error of one output has rms about u*K/sqrt(2) = u*sqrt(K)/sqrt(2) * rms(ref)
  (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., section 3.1; Higham and Mary,
  SIAM J. Sci. Comput. 41(5), 2019, probabilistic rounding error analysis). It does not shrink
  with |ref| (an element near zero of a large-K product carries it all), so it is absolute and
  scales with the output's rms, which makes it independent of the inputs' scale;
- TF32 (float32 inputs rounded to 10 mantissa bits, rule 7, P9): TF32_ULPS * u_tf32 * rms(ref)
  absolute, and TF32_NORM_ULPS * u_tf32 in the norm-wise gate;
- the output dtype's subnormal range, where rounding is absolute: atol_floor = 2 * smallest
  normal * u_out (float16 softmax outputs below 6.1e-5 are subnormal).

Where the constants come from: benchmarks/calibrate_check.py prints, for every shipped
implementation, dtype, test spec and input set, the fraction of the default tolerance its error
uses (the GPU stage benchmarks/stages/check.py records the same on the H200). On CPU (torch 2.13,
Triton 3.6 interpreted) the worst fractions were:
- OUT_ULPS = 2: 0.499 elementwise for the fused and built-in forms in half precision (their one
  rounding is within 1 u: a 2x margin);
- NORM_OUT_ULPS = 1: 0.65 norm-wise (float16 softmax, whose rows are dominated by one entry);
  a result correctly rounded from float32 arithmetic cannot exceed 1 u + the work term in norm;
- WORK_ULPS = 16: 0.53 elementwise for float32 outputs (pytorch_erf: torch's float32 erf against
  float64's), <= 0.16 for every other, 0.08 norm-wise;
- ACCUMULATION_ULPS = 16: 0.15 for float32 matmul on CPU; on the H200, cuBLAS float32 IEEE at
  M = N = K = 16384 had a max error of 4.8 * u * K = 4.8 * u * sqrt(K) * rms(ref) (a 3.3x
  margin, about 6 sigma of ~1e9 elements); it stays ~8x under TF32's error up to K ~ 2^20;
- SUM_ULPS = 2: float32 softmax at N = 8192 needed 1.6x the tolerance without this term (its
  denominator's rounding scales every output), 0.15 with it;
- TF32_ULPS = 16, TF32_NORM_ULPS = 4: TF32 input rounding gives an rms error of ~1.2 u_tf32
  relative to rms(ref), independent of K (tests/test_check_tolerance.py: TF32 passes these,
  IEEE's tolerance rejects it).
fp8: the OUTPUT's dtype sets the rounding term (a scaled matmul of fp8 inputs writes bfloat16: u
2^-8; a quantizer writes e4m3: u 2^-4). The inputs' quantisation is part of the op's definition,
not an error: the float64 reference is computed from the dequantised fp8 inputs (fp8 * scale).
An all-zeros output has norm-wise error 1 and 0.5*ref has 0.5: both fail every dtype at every K
below ~2^40 (the accumulation term reaches 0.5 there).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

UNIT_ROUNDOFF = {"float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8,
                 # fp8 (OCP FP8 v1.0): 3 mantissa bits, ulp 2^-3, u 2^-4; 2 bits, ulp 2^-2, u 2^-3
                 "float8_e4m3fn": 2.0 ** -4, "float8_e5m2": 2.0 ** -3}
TF32_UNIT_ROUNDOFF = 2.0 ** -11
# Hopper's fp8 tensor cores keep about 14 bits of the running sum inside an MMA (DeepSeek-V3
# technical report, section 3.3.2: "limited to retaining around 14 bits" on H800), not float32's
# 24: cuBLASLt's and Triton's fp8 GEMMs both miss a float32-accumulation atol on the H100
# (max |err| 2^-15.9 and 2^-14.7 of rms(ref) * 16 * sqrt(K) at 4096^3, torch 2.11, triton 3.6).
# One bit of margin over the report's 14: the elementwise accumulation term of an op with fp8
# inputs uses 2^-13. The norm-wise gate keeps float32's term (measured rel_l2 0.0017 at 4096^3
# passes it; an fp16 accumulator, 11 bits, does not).
FP8_MMA_UNIT_ROUNDOFF = 2.0 ** -13
FP32_UNIT_ROUNDOFF = UNIT_ROUNDOFF["float32"]
# Largest finite exponent (emax) and smallest normal of each dtype (IEEE 754; bfloat16 keeps
# float32's exponent range; e4m3fn's max 448 = 1.75 * 2^8, e5m2's 57344 = 1.75 * 2^15).
MAX_EXPONENT = {"float32": 127, "float16": 15, "bfloat16": 127, "float8_e4m3fn": 8, "float8_e5m2": 15}
SMALLEST_NORMAL = {"float32": 2.0 ** -126, "float16": 2.0 ** -14, "bfloat16": 2.0 ** -126,
                   "float8_e4m3fn": 2.0 ** -6, "float8_e5m2": 2.0 ** -14}
# fp8's largest finite values. A quantizer SATURATES: a value past the max becomes +-max, never
# inf or NaN (e4m3fn has no inf and its one NaN pattern is all ones; torch's CPU cast and the
# PTX cvt.rn.satfinite both clamp). The check expects the saturated value for an fp8 output.
FP8_MAX = {"float8_e4m3fn": 448.0, "float8_e5m2": 57344.0}

OUT_ULPS = 2.0
WORK_ULPS = 16.0
ACCUMULATION_ULPS = 16.0
NORM_OUT_ULPS = 1.0
TF32_ULPS = 16.0
TF32_NORM_ULPS = 4.0
SUM_ULPS = 2.0


@dataclass(frozen=True)
class Tolerance:
    """The two gates of one check (see the module docstring); all terms are >= 0.

    rtol: elementwise relative term; atol_rms: elementwise absolute term as a multiple of the
    reference's rms; atol_floor: absolute floor (subnormal rounding); norm_rtol: the norm-wise bound.
    """

    rtol: float
    atol_rms: float
    atol_floor: float
    norm_rtol: float

    def atol(self, ref_rms: float) -> float:
        """The elementwise absolute term for a reference of this rms (finite elements only)."""
        return self.atol_rms * ref_rms + self.atol_floor


def overflow_threshold(dtype: str) -> float:
    """The magnitude from which a value rounds to +-inf in `dtype` (round to nearest even):
    2^(emax+1) * (1 - u/2), e.g. float16 65520. A reference at or beyond it expects inf.
    fp8 saturates instead (FP8_MAX): nothing rounds to inf, the threshold is inf."""
    if dtype in FP8_MAX:
        return math.inf
    return 2.0 ** (MAX_EXPONENT[dtype] + 1) * (1.0 - UNIT_ROUNDOFF[dtype] / 2.0)


def tolerance(dtype: str, *, tf32: bool = False, reduction_length: int | None = None,
              sum_length: int | None = None, factor: float = 1.0, truncating: bool = False,
              accumulation_u: float | None = None) -> Tolerance:
    """The tolerance of one check.

    dtype: the precision the op rounds its output to ("float32" | "float16" | "bfloat16" |
    "float8_e4m3fn" | "float8_e5m2"; the output's dtype, Op.rounding_dtype: a scaled matmul of fp8
    inputs rounds to bfloat16, a quantizer to fp8, where the subnormal floor is in the scaled units);
    tf32: float32 inputs computed in TF32 (rule 7, P9); reduction_length: K of a matmul-like
    op's signed K-term sum (absolute term, None or 1 for the rest); sum_length: N of a sum of
    positive terms that scales every output (softmax's denominator: relative term);
    factor: an implementation's declared factor (>= 1, its reason in its docstring): its
    arithmetic error is up to this many times float32's. It scales every term but the final
    rounding to the output dtype and the accumulation terms (float32 sums in every kernel);
    u_dtype / u_f32 (2^13 float16, 2^16 bfloat16) would be arithmetic in the dtype throughout;
    truncating: the output is rounded toward zero, an error below 1 ulp = 2 u, so the output
    rounding terms double (Triton 3.6's CPU interpreter casts float32 to bfloat16 by dropping
    the low bits; GPUs round to nearest); accumulation_u: the unit roundoff of the K-term sum
    where it is coarser than float32's, for the elementwise gate only (FP8_MMA_UNIT_ROUNDOFF: the
    products of fp8 inputs on tensor cores). Raises KeyError for another dtype, ValueError for a factor below 1.
    """
    if factor < 1.0:
        raise ValueError(f"tolerance factor must be >= 1, got {factor}")
    u_out = UNIT_ROUNDOFF[dtype] * (2.0 if truncating else 1.0)
    u32 = FP32_UNIT_ROUNDOFF
    work = factor * WORK_ULPS * u32
    rtol, atol_rms = OUT_ULPS * u_out + work, work
    norm = NORM_OUT_ULPS * u_out + work
    if reduction_length and reduction_length > 1:
        accumulation = ACCUMULATION_ULPS * u32 * math.sqrt(reduction_length)
        atol_rms += ACCUMULATION_ULPS * max(u32, accumulation_u or 0.0) * math.sqrt(reduction_length)
        norm += accumulation
    if sum_length and sum_length > 1:
        positive = SUM_ULPS * u32 * math.sqrt(sum_length)
        rtol += positive
        norm += positive
    if tf32 and dtype == "float32":
        atol_rms += TF32_ULPS * TF32_UNIT_ROUNDOFF
        norm += TF32_NORM_ULPS * TF32_UNIT_ROUNDOFF
    floor = 2.0 * SMALLEST_NORMAL[dtype] * u_out * factor
    return Tolerance(rtol, atol_rms, floor, norm)

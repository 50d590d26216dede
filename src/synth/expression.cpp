#include "synth/expression.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>

namespace cuda_agent::synth {

using nlohmann::json;

std::string literal(double v) {
  if (std::isnan(v)) return "NAN";
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "(-INFINITY)";
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%.9g", v);
  std::string s = buffer;
  if (s.find_first_of(".eni") == std::string::npos) s += ".0";
  return s + "f";
}

const json& argument(const Op& op, std::size_t index, const char* name) {
  static const json kNull;
  if (op.args.is_array() && index < op.args.size()) return op.args[index];
  if (op.kwargs.is_object() && op.kwargs.contains(name)) return op.kwargs[name];
  return kNull;
}

namespace {

/// A scalar argument as capture records it: a JSON number, or "inf", "-inf" or "nan" (which
/// JSON has no number for).
bool is_scalar(const json& value) {
  if (value.is_number()) return true;
  if (!value.is_string()) return false;
  const auto& s = value.get_ref<const std::string&>();
  return s == "inf" || s == "-inf" || s == "nan";
}

double number(const json& value, double fallback) {
  if (value.is_number()) return value.get<double>();
  if (!is_scalar(value)) return fallback;
  const auto& s = value.get_ref<const std::string&>();
  if (s == "nan") return std::nan("");
  return s == "inf" ? HUGE_VAL : -HUGE_VAL;
}

/// How each op's per-element expression is written, from its operands' expressions.
struct Writer {
  const Op& op;
  std::vector<std::string> operands;  // one per argument position; "" where not a value
  std::string* problem;

  /// The expression of argument index: a value's variable or a scalar's literal.
  std::string operand(std::size_t index, const char* name) const {
    if (index < operands.size() && !operands[index].empty()) return operands[index];
    const json& value = argument(op, index, name);
    if (is_scalar(value)) return literal(number(value, 0));
    if (value.is_boolean()) return value.get<bool>() ? "1.0f" : "0.0f";
    *problem =
        op.target + " argument " + std::to_string(index) + " is neither a tensor nor a number";
    return "0.0f";
  }
  double scalar(std::size_t index, const char* name, double fallback) const {
    return number(argument(op, index, name), fallback);
  }
};

using Rule = std::function<std::string(const Writer&)>;

/// "(left sign alpha * right)" for add, sub and rsub, whose third argument alpha scales `other`.
std::string scaled_sum(const Writer& w, const std::string& left, const char* sign,
                       const std::string& right) {
  double alpha = w.scalar(2, "alpha", 1);
  return "(" + left + " " + sign + " " + (alpha == 1 ? right : literal(alpha) + " * " + right) +
         ")";
}

/// "(self <op> other ? 1.0f : 0.0f)": a comparison's bool as the kernels hold it.
std::string compare(const Writer& w, const char* op) {
  return "(" + w.operand(0, "self") + " " + op + " " + w.operand(1, "other") + " ? 1.0f : 0.0f)";
}

const std::map<std::string, Rule>& rules() {
  static const auto* table = new std::map<std::string, Rule>{
      {"relu", [](const Writer& w) { return "sa_max(" + w.operand(0, "self") + ", 0.0f)"; }},
      {"relu6",
       [](const Writer& w) { return "sa_min(sa_max(" + w.operand(0, "self") + ", 0.0f), 6.0f)"; }},
      {"sigmoid",
       [](const Writer& w) { return "sa_div(1.0f, 1.0f + expf(-" + w.operand(0, "self") + "))"; }},
      {"tanh", [](const Writer& w) { return "tanhf(" + w.operand(0, "self") + ")"; }},
      {"silu",
       [](const Writer& w) {
         std::string a = w.operand(0, "self");
         return "sa_div(" + a + ", 1.0f + expf(-" + a + "))";
       }},
      {"gelu",
       [](const Writer& w) {
         std::string a = w.operand(0, "self");
         const json& approximate = argument(w.op, 1, "approximate");
         if (approximate.is_string() && approximate.get<std::string>() == "tanh") {
           return "0.5f * " + a + " * (1.0f + tanhf(0.7978845608f * (" + a + " + 0.044715f * " + a +
                  " * " + a + " * " + a + ")))";
         }
         return "0.5f * " + a + " * (1.0f + erff(" + a + " * 0.70710678118f))";
       }},
      {"hardswish",
       [](const Writer& w) {
         std::string a = w.operand(0, "self");
         return "sa_div(" + a + " * sa_min(sa_max(" + a + " + 3.0f, 0.0f), 6.0f), 6.0f)";
       }},
      {"hardsigmoid",
       [](const Writer& w) {
         return "sa_div(sa_min(sa_max(" + w.operand(0, "self") + " + 3.0f, 0.0f), 6.0f), 6.0f)";
       }},
      {"leaky_relu",
       [](const Writer& w) {
         std::string a = w.operand(0, "self");
         return "(" + a + " > 0.0f ? " + a + " : " + a + " * " +
                literal(w.scalar(1, "negative_slope", 0.01)) + ")";
       }},
      {"elu",
       [](const Writer& w) {
         std::string a = w.operand(0, "self");
         std::string alpha = literal(w.scalar(1, "alpha", 1)),
                     scale = literal(w.scalar(2, "scale", 1));
         std::string input_scale = literal(w.scalar(3, "input_scale", 1));
         return "(" + a + " > 0.0f ? " + scale + " * " + a + " : " + scale + " * " + alpha +
                " * (expf(" + a + " * " + input_scale + ") - 1.0f))";
       }},
      {"softplus",
       [](const Writer& w) {
         std::string a = w.operand(0, "self");
         std::string beta = literal(w.scalar(1, "beta", 1));
         std::string threshold = literal(w.scalar(2, "threshold", 20));
         return "(" + a + " * " + beta + " > " + threshold + " ? " + a + " : log1pf(expf(" + a +
                " * " + beta + ")) / " + beta + ")";
       }},
      {"abs", [](const Writer& w) { return "fabsf(" + w.operand(0, "self") + ")"; }},
      {"neg", [](const Writer& w) { return "-(" + w.operand(0, "self") + ")"; }},
      {"exp", [](const Writer& w) { return "expf(" + w.operand(0, "self") + ")"; }},
      {"log", [](const Writer& w) { return "logf(" + w.operand(0, "self") + ")"; }},
      {"log1p", [](const Writer& w) { return "log1pf(" + w.operand(0, "self") + ")"; }},
      {"sqrt", [](const Writer& w) { return "sqrtf(" + w.operand(0, "self") + ")"; }},
      {"rsqrt", [](const Writer& w) { return "1.0f / sqrtf(" + w.operand(0, "self") + ")"; }},
      {"reciprocal", [](const Writer& w) { return "1.0f / " + w.operand(0, "self"); }},
      {"sin", [](const Writer& w) { return "sinf(" + w.operand(0, "self") + ")"; }},
      {"cos", [](const Writer& w) { return "cosf(" + w.operand(0, "self") + ")"; }},
      {"erf", [](const Writer& w) { return "erff(" + w.operand(0, "self") + ")"; }},
      {"square",
       [](const Writer& w) {
         std::string a = w.operand(0, "self");
         return a + " * " + a;
       }},
      {"pow",
       [](const Writer& w) {
         std::string a = w.operand(0, "self");
         if (w.operands.size() > 1 && !w.operands[1].empty())
           return "powf(" + a + ", " + w.operands[1] + ")";
         double e = w.scalar(1, "exponent", 1);
         if (e == 2) return a + " * " + a;
         return "powf(" + a + ", " + literal(e) + ")";
       }},
      {"clamp",
       [](const Writer& w) {
         std::string e = w.operand(0, "self");
         if (argument(w.op, 1, "min").is_number())
           e = "sa_max(" + e + ", " + w.operand(1, "min") + ")";
         if (argument(w.op, 2, "max").is_number())
           e = "sa_min(" + e + ", " + w.operand(2, "max") + ")";
         return e;
       }},
      {"clamp_min",
       [](const Writer& w) {
         return "sa_max(" + w.operand(0, "self") + ", " + w.operand(1, "min") + ")";
       }},
      {"clamp_max",
       [](const Writer& w) {
         return "sa_min(" + w.operand(0, "self") + ", " + w.operand(1, "max") + ")";
       }},
      {"hardtanh",
       [](const Writer& w) {
         return "sa_min(sa_max(" + w.operand(0, "self") + ", " +
                literal(w.scalar(1, "min_val", -1)) + "), " + literal(w.scalar(2, "max_val", 1)) +
                ")";
       }},
      {"add",
       [](const Writer& w) {
         return scaled_sum(w, w.operand(0, "self"), "+", w.operand(1, "other"));
       }},
      {"sub",
       [](const Writer& w) {
         return scaled_sum(w, w.operand(0, "self"), "-", w.operand(1, "other"));
       }},
      {"rsub",
       [](const Writer& w) {
         return scaled_sum(w, w.operand(1, "other"), "-", w.operand(0, "self"));
       }},
      {"mul",
       [](const Writer& w) {
         return "(" + w.operand(0, "self") + " * " + w.operand(1, "other") + ")";
       }},
      // Comparisons make bools, which the kernels hold as 1.0f or 0.0f.
      {"eq", [](const Writer& w) { return compare(w, "=="); }},
      {"ne", [](const Writer& w) { return compare(w, "!="); }},
      {"lt", [](const Writer& w) { return compare(w, "<"); }},
      {"le", [](const Writer& w) { return compare(w, "<="); }},
      {"gt", [](const Writer& w) { return compare(w, ">"); }},
      {"ge", [](const Writer& w) { return compare(w, ">="); }},
      // A bool tensor reads as 1.0f or 0.0f (sa_load), so a condition is a comparison with 0.
      {"where",
       [](const Writer& w) {
         return "(" + w.operand(0, "condition") + " != 0.0f ? " + w.operand(1, "self") + " : " +
                w.operand(2, "other") + ")";
       }},
      {"masked_fill",
       [](const Writer& w) {
         return "(" + w.operand(1, "mask") + " != 0.0f ? " + w.operand(2, "value") + " : " +
                w.operand(0, "self") + ")";
       }},
      // Losses with reduction "none" (0) are elementwise; a reduced loss is left to the plans
      // (torch's default, 1, is the mean).
      {"smooth_l1_loss",
       [](const Writer& w) {
         if (w.scalar(2, "reduction", 1) != 0) *w.problem = w.op.target + " with a reduction";
         const std::string d = "(" + w.operand(0, "self") + " - " + w.operand(1, "target") + ")";
         const double beta = w.scalar(3, "beta", 1);
         if (beta == 0) return "fabsf" + d;
         return "(fabsf" + d + " < " + literal(beta) + " ? 0.5f * " + d + " * " + d + " / " +
                literal(beta) + " : fabsf" + d + " - " + literal(0.5 * beta) + ")";
       }},
      {"kl_div",
       [](const Writer& w) {
         if (w.scalar(2, "reduction", 1) != 0) *w.problem = w.op.target + " with a reduction";
         const std::string in = w.operand(0, "self"), t = w.operand(1, "target");
         const json& log_target = argument(w.op, 3, "log_target");
         if (log_target.is_boolean() && log_target.get<bool>())
           return "expf(" + t + ") * (" + t + " - " + in + ")";
         // xlogy(t, t) - t * in: 0 where t is 0, as torch's xlogy.
         return "((" + t + " == 0.0f ? 0.0f : " + t + " * logf(" + t + ")) - " + t + " * " + in +
                ")";
       }},
      {"div",
       [](const Writer& w) {
         if (!argument(w.op, 2, "rounding_mode").is_null()) {
           *w.problem = w.op.target + " with a rounding mode";
         }
         return "sa_div(" + w.operand(0, "self") + ", " + w.operand(1, "other") + ")";
       }},
  };
  return *table;
}

}  // namespace

const char* const kExpressionHelpers =
    "SA_FN float sa_max(float a, float b) { return a != a ? a : (a > b ? a : b); }\n"
    "SA_FN float sa_min(float a, float b) { return a != a ? a : (a < b ? a : b); }\n";

bool is_float_dtype(const std::string& dtype) {
  return dtype == "float32" || dtype == "bfloat16" || dtype == "float16";
}

bool is_16_bit_float(const std::string& dtype) { return dtype == "bfloat16" || dtype == "float16"; }

bool is_input_dtype(const std::string& dtype) {
  return is_float_dtype(dtype) || dtype == "bool" || dtype == "int64";
}

std::string element_type(const std::string& dtype) {
  if (dtype == "bfloat16") return "sa_bf16";
  if (dtype == "float16") return "sa_f16";
  if (dtype == "bool") return "bool";
  if (dtype == "int64") return "int64_t";
  return "float";
}

std::string rounded(const std::string& expression, const std::string& dtype) {
  if (is_16_bit_float(dtype)) return "sa_round_" + dtype + "(" + expression + ")";
  return expression;
}

namespace {

// V consecutive elements at once from and to an address aligned to their size: 4 (16 bytes of
// float32, 8 of a 16-bit type), 8 (16 bytes of a 16-bit type, two 16-byte accesses of float32)
// or 1, the scalar case.
const char* const kCudaVectorHelpers =
    "SA_FN void sa_load4(const float* p, float* v) {\n"
    "  const float4 x = *reinterpret_cast<const float4*>(p);\n"
    "  v[0] = x.x; v[1] = x.y; v[2] = x.z; v[3] = x.w;\n}\n"
    "SA_FN void sa_store4(float* p, const float* v) {\n"
    "  __stwb(reinterpret_cast<float4*>(p), make_float4(v[0], v[1], v[2], v[3]));\n}\n"
    "SA_FN void sa_load8(const float* p, float* v) { sa_load4(p, v); sa_load4(p + 4, v + 4); }\n"
    "SA_FN void sa_store8(float* p, const float* v) { sa_store4(p, v); sa_store4(p + 4, v + 4); }\n"
    "// Two 16-bit values as one 32-bit word, to and from two floats (the pointer names the\n"
    "// type). A vector is loaded whole, as uint2 or uint4, and taken apart word by word by\n"
    "// value (an unpacking through its address lets the compiler split the load); it is stored\n"
    "// by __stwb, one instruction, where a plain store of it may be split into words too.\n"
    "SA_FN float2 sa_unword(uint32_t u, const sa_bf16*) {\n"
    "  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u));\n}\n"
    "SA_FN float2 sa_unword(uint32_t u, const sa_f16*) {\n"
    "  return __half22float2(*reinterpret_cast<const __half2*>(&u));\n}\n"
    "SA_FN uint32_t sa_word(float a, float b, const sa_bf16*) {\n"
    "  const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);\n"
    "  return *reinterpret_cast<const uint32_t*>(&h);\n}\n"
    "SA_FN uint32_t sa_word(float a, float b, const sa_f16*) {\n"
    "  const __half2 h = __floats2half2_rn(a, b);\n"
    "  return *reinterpret_cast<const uint32_t*>(&h);\n}\n"
    "template <class T> SA_FN void sa_unwords(const uint32_t* w, int n, const T* p, float* v) {\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < n; ++i) {\n"
    "    const float2 f = sa_unword(w[i], p);\n"
    "    v[2 * i] = f.x; v[2 * i + 1] = f.y;\n  }\n}\n"
    "template <class T> SA_FN void sa_load4_16(const T* p, float* v) {\n"
    "  const uint2 x = *reinterpret_cast<const uint2*>(p);\n"
    "  const uint32_t w[2] = {x.x, x.y};\n"
    "  sa_unwords(w, 2, p, v);\n}\n"
    "template <class T> SA_FN void sa_load8_16(const T* p, float* v) {\n"
    "  const uint4 x = *reinterpret_cast<const uint4*>(p);\n"
    "  const uint32_t w[4] = {x.x, x.y, x.z, x.w};\n"
    "  sa_unwords(w, 4, p, v);\n}\n"
    "template <class T> SA_FN void sa_store4_16(T* p, const float* v) {\n"
    "  __stwb(reinterpret_cast<uint2*>(p), make_uint2(sa_word(v[0], v[1], p), sa_word(v[2], v[3], "
    "p)));\n}\n"
    "template <class T> SA_FN void sa_store8_16(T* p, const float* v) {\n"
    "  __stwb(reinterpret_cast<uint4*>(p), make_uint4(sa_word(v[0], v[1], p), sa_word(v[2], v[3], "
    "p),\n"
    "                                               sa_word(v[4], v[5], p), sa_word(v[6], v[7], "
    "p)));\n}\n"
    "SA_FN void sa_load4(const sa_bf16* p, float* v) { sa_load4_16(p, v); }\n"
    "SA_FN void sa_load4(const sa_f16* p, float* v) { sa_load4_16(p, v); }\n"
    "SA_FN void sa_load8(const sa_bf16* p, float* v) { sa_load8_16(p, v); }\n"
    "SA_FN void sa_load8(const sa_f16* p, float* v) { sa_load8_16(p, v); }\n"
    "SA_FN void sa_store4(sa_bf16* p, const float* v) { sa_store4_16(p, v); }\n"
    "SA_FN void sa_store4(sa_f16* p, const float* v) { sa_store4_16(p, v); }\n"
    "SA_FN void sa_store8(sa_bf16* p, const float* v) { sa_store8_16(p, v); }\n"
    "SA_FN void sa_store8(sa_f16* p, const float* v) { sa_store8_16(p, v); }\n"
    "// Four or eight bools (one byte each) as one 32- or 64-bit word.\n"
    "SA_FN void sa_unbytes(uint32_t w, float* v) {\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < 4; ++i) v[i] = ((w >> (8 * i)) & 0xFFu) ? 1.0f : 0.0f;\n}\n"
    "SA_FN void sa_load4(const bool* p, float* v) {\n"
    "  sa_unbytes(*reinterpret_cast<const uint32_t*>(p), v);\n}\n"
    "SA_FN void sa_load8(const bool* p, float* v) {\n"
    "  const uint2 x = *reinterpret_cast<const uint2*>(p);\n"
    "  sa_unbytes(x.x, v);\n  sa_unbytes(x.y, v + 4);\n}\n"
    "// int64 values (indices, read as floats: exact below 2^24) one at a time.\n"
    "SA_FN void sa_load4(const int64_t* p, float* v) {\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < 4; ++i) v[i] = (float)p[i];\n}\n"
    "SA_FN void sa_load8(const int64_t* p, float* v) { sa_load4(p, v); sa_load4(p + 4, v + 4); }\n"
    "template <int V, class T> SA_FN void sa_load_v(const T* p, float* v) {\n"
    "  if (V == 8) sa_load8(p, v);\n"
    "  else if (V == 4) sa_load4(p, v);\n"
    "  else v[0] = sa_load(p[0]);\n}\n"
    "template <int V, class T> SA_FN void sa_store_v(T* p, const float* v) {\n"
    "  if (V == 8) sa_store8(p, v);\n"
    "  else if (V == 4) sa_store4(p, v);\n"
    "  else sa_store(p, v[0]);\n}\n"
    "// Whether p may be read or written V elements at a time.\n"
    "template <int V, class T> static bool sa_aligned(const T* p) {\n"
    "  return reinterpret_cast<uintptr_t>(p) % (V * sizeof(T)) == 0;\n}\n";

}  // namespace

// (x / div) % mod, the position of row coordinate x in one of an input's groups of dims:
// nothing to compute for a unit div or mod, 32-bit arithmetic where everything fits (a 64-bit
// division costs several times as much, once per row per input), 64-bit otherwise.
const char* const kIndexHelper =
    "SA_FN uint32_t sa_index32(uint32_t x, uint32_t div, uint32_t mod) {\n"
    "  const uint32_t q = div == 1 ? x : x / div;\n"
    "  return q < mod ? q : q % mod;\n}\n"
    "SA_FN int64_t sa_index(int64_t x, int64_t div, int64_t mod) {\n"
    "  if (mod == 1) return 0;\n"
    "  if (((x | div | mod) >> 31) == 0)\n"
    "    return sa_index32((uint32_t)x, (uint32_t)div, (uint32_t)mod);\n"
    "  return (x / div) % mod;\n}\n";

const char* const kCudaGridHelper =
    "// A launch's grid: one block per unit of work, up to the grid's limit (2^31 - 1), past\n"
    "// which the kernels' grid-strided loops take the rest.\n"
    "static unsigned sa_grid(int64_t blocks) {\n"
    "  return (unsigned)(blocks < INT32_MAX ? blocks : INT32_MAX);\n}\n";

std::string dtype_helpers(const std::string& device) {
  std::string common =
      "SA_FN float sa_load(float x) { return x; }\n"
      "SA_FN void sa_store(float* p, float x) { *p = x; }\n"
      "SA_FN void sa_store(int64_t* p, int64_t x) { *p = x; }\n"
      "SA_FN float sa_load(bool x) { return x ? 1.0f : 0.0f; }\n"
      "SA_FN float sa_load(int64_t x) { return (float)x; }\n";
  if (device == "cuda") {
    return "#include <cuda_bf16.h>\n#include <cuda_fp16.h>\n"
           "typedef __nv_bfloat16 sa_bf16;\ntypedef __half sa_f16;\n" +
           common +
           "SA_FN float sa_load(sa_bf16 x) { return __bfloat162float(x); }\n"
           "SA_FN float sa_load(sa_f16 x) { return __half2float(x); }\n"
           "SA_FN void sa_store(sa_bf16* p, float x) { *p = __float2bfloat16_rn(x); }\n"
           "SA_FN void sa_store(sa_f16* p, float x) { *p = __float2half_rn(x); }\n"
           "SA_FN float sa_round_bfloat16(float x) { return "
           "__bfloat162float(__float2bfloat16_rn(x)); }\n"
           "SA_FN float sa_round_float16(float x) { return __half2float(__float2half_rn(x)); }\n"
           "// e^x for x <= 0 (a softmax's or logsumexp's shifted exponent) by the hardware's "
           "2^x:\n"
           "// within 2 + 1.2 |x| ulp, a relative 1e-5 at x = -88, as Triton's exp.\n"
           "SA_FN float sa_exp_shifted(float x) { return __expf(x); }\n"
           "// a / b by the GPU's div.full (within 2 ulp, as Triton's / for float32), not the\n"
           "// IEEE division's dozen instructions and slow path.\n"
           "SA_FN float sa_div(float a, float b) { return __fdividef(a, b); }\n" +
           kCudaVectorHelpers;
  }
  // bfloat16 is the high half of a float32; float16 is the compiler's _Float16.
  return "#include <string.h>\n"
         "typedef struct { uint16_t bits; } sa_bf16;\ntypedef _Float16 sa_f16;\n" +
         common +
         "SA_FN float sa_load(sa_bf16 x) {\n"
         "  const uint32_t b = (uint32_t)x.bits << 16;\n  float f;\n  memcpy(&f, &b, 4);\n"
         "  return f;\n}\n"
         "SA_FN float sa_load(sa_f16 x) { return (float)x; }\n"
         "SA_FN sa_bf16 sa_to_bf16(float x) {\n"
         "  uint32_t b;\n  memcpy(&b, &x, 4);\n"
         "  if (x != x) return sa_bf16{(uint16_t)((b >> 16) | 0x40)};  // a quiet NaN\n"
         "  b += 0x7FFFu + ((b >> 16) & 1u);  // to nearest, ties to even\n"
         "  return sa_bf16{(uint16_t)(b >> 16)};\n}\n"
         "SA_FN void sa_store(sa_bf16* p, float x) { *p = sa_to_bf16(x); }\n"
         "SA_FN void sa_store(sa_f16* p, float x) { *p = (sa_f16)x; }\n"
         "SA_FN float sa_round_bfloat16(float x) { return sa_load(sa_to_bf16(x)); }\n"
         "SA_FN float sa_round_float16(float x) { return (float)(sa_f16)x; }\n"
         "SA_FN float sa_exp_shifted(float x) { return expf(x); }\n"
         "SA_FN float sa_div(float a, float b) { return a / b; }\n"
         "// glibc's vector math (libmvec, within 4 ulp): a loop calling these vectorizes.\n"
         "#if defined(__GLIBC__) && defined(__x86_64__)\n"
         "#pragma omp declare simd notinbranch\nextern \"C\" float expf(float) noexcept;\n"
         "#pragma omp declare simd notinbranch\nextern \"C\" float logf(float) noexcept;\n"
         "#pragma omp declare simd notinbranch\nextern \"C\" float log1pf(float) noexcept;\n"
         "#pragma omp declare simd notinbranch\nextern \"C\" float tanhf(float) noexcept;\n"
         "#pragma omp declare simd notinbranch\nextern \"C\" float erff(float) noexcept;\n"
         "#pragma omp declare simd notinbranch\n"
         "extern \"C\" float powf(float, float) noexcept;\n"
         "#endif\n";
}

bool is_elementwise_op(const std::string& base_name) { return rules().count(base_name) > 0; }

std::string position_expression(const Op& op, bool* exact) {
  const auto number = [&](std::size_t index, const char* name, double fallback) {
    const json& a = argument(op, index, name);
    return a.is_number() ? a.get<double>() : a.is_null() ? fallback : std::nan("");
  };
  // The length is the dim's; only the start and the step matter here.
  const bool from_zero = op.target == "aten.arange.default";
  const double start = from_zero ? 0 : number(0, "start", 0);
  const double step = from_zero ? 1 : number(2, "step", 1);
  if (std::isnan(start) || std::isnan(step)) return "";
  *exact = start == std::floor(start) && step == std::floor(step);
  return "(" + literal(start) + " + " + literal(step) + " * (float)k)";
}

bool rounds_exactly(const Op& op) {
  static const std::set<std::string> selections = {
      "relu",  "relu6",       "abs", "neg", "clamp", "clamp_min", "clamp_max", "hardtanh", "square",
      "where", "masked_fill", "eq",  "ne",  "lt",    "le",        "gt",        "ge"};
  static const std::set<std::string> arithmetic = {"add", "sub",  "rsub",
                                                   "mul", "sqrt", "leaky_relu"};
  if (selections.count(op.name)) return true;
  if (!arithmetic.count(op.name)) return false;
  // alpha * other + self may be contracted into one fused multiply-add here and not in torch.
  const json& alpha = argument(op, 2, "alpha");
  return (op.name != "add" && op.name != "sub" && op.name != "rsub") || alpha.is_null() ||
         (alpha.is_number() && alpha.get<double>() == 1);
}

std::string elementwise_expression(const Op& op, const std::vector<std::string>& operands,
                                   std::string* problem) {
  auto rule = rules().find(op.name);
  if (rule == rules().end()) {
    *problem = op.target + " is not an elementwise op the fused kernels write";
    return "0.0f";
  }
  Writer w{op, operands, problem};
  return rule->second(w);
}

}  // namespace cuda_agent::synth

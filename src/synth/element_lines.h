/// Elementwise ops written as lines of float expressions at one position of a kernel's index
/// space, for the kernels that fuse them around an op of another kind: the elements a
/// pooling's windows read and its outputs, the elements a scan reads and writes. An input is
/// read at that position (broadcast to the space's shape), each op's result kept in float32 and
/// rounded to a 16-bit dtype only where it is torch's value bit for bit (rounds_exactly).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "synth/graph.h"

namespace cuda_agent::synth {

/// A graph input (an input, parameter or buffer) a kernel reads at one side's positions.
struct ElementInput {
  int value = -1;
  bool after = false;  // read at the positions of what the fused op makes, not of what it reads
  std::string dtype;   // float32, bfloat16, float16 or bool
};

/// The graph values of inputs, in their order.
std::vector<int> values_of(const std::vector<ElementInput>& inputs);

/// Where the lines of one side go, and what they are called.
struct ElementSide {
  std::vector<ElementInput>* inputs;  // shared by the sides: in0, in1, ... in argument order
  std::vector<std::string>* lines;    // "const float <prefix>K = ...;"
  std::vector<std::string>* ops;      // the names of the ops written, in order
  std::string prefix;                 // of the variables: "b" before, "a" after
  bool after = false;
  std::string kernel;  // the op the kernel is named for, in problems: "pooling"
};

class ElementLines {
 public:
  ElementLines(const Graph& graph, ElementSide side, std::vector<std::string>* problems)
      : graph_(graph), side_(std::move(side)), problems_(problems) {}

  /// The variable of value on this side: an op's, a defined one, or an input read at this
  /// side's positions of shape. False (a problem said) for a value the side cannot read.
  bool operand(int value, const std::vector<std::int64_t>& shape, std::string* variable);

  /// value is `variable` on this side (the fused op's result, a position).
  void define(int value, const std::string& variable, bool exact);

  /// op, an elementwise op whose result broadcasts to shape, as the side's next line.
  bool add(const Op& op, const std::vector<std::int64_t>& shape);

  /// Whether value's variable holds torch's float32 value bit for bit.
  bool exact(int value) const { return !inexact_.count(value); }

 private:
  const Graph& graph_;
  ElementSide side_;
  std::vector<std::string>* problems_;
  std::map<int, std::string> variable_;
  std::set<int> inexact_;
};

/// The values value is computed from, itself included, back to the graph's inputs: the ops
/// before a fused op that lead to it.
std::set<int> ancestors(const Graph& graph, int value);

/// Whether shape, aligned to target's last dims, is 1 or target's size in each dim.
bool broadcasts_to(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& target);

}  // namespace cuda_agent::synth

#include "util/text.h"

#include <gtest/gtest.h>

namespace cuda_agent {
namespace {

std::string numbered_lines(int n) {
  std::string text;
  for (int i = 0; i < n; ++i) text += "line " + std::to_string(i) + "\n";
  return text;
}

TEST(TrimLines, ShortTextIsUnchanged) {
  std::string text = numbered_lines(10);
  EXPECT_EQ(trim_lines(text, 5, 5), text);
}

TEST(TrimLines, LongTextKeepsHeadAndTailAndSaysWhatWasCut) {
  std::string trimmed = trim_lines(numbered_lines(100), 3, 2);
  EXPECT_NE(trimmed.find("line 0\nline 1\nline 2\n"), std::string::npos);
  EXPECT_EQ(trimmed.find("line 3\n"), std::string::npos);
  EXPECT_NE(trimmed.find("[95 of 100 lines cut]"), std::string::npos);
  EXPECT_NE(trimmed.find("line 98\nline 99\n"), std::string::npos);
}

TEST(CompilerLog, FirstErrorIsLiftedOutBeforeTheLog) {
  std::string log = numbered_lines(200) +
                    "kernels/a.cu(12): error: identifier \"blockIdy\" is undefined\n"
                    "      int i = blockIdy.x;\n" +
                    numbered_lines(200) + "kernels/a.cu(40): error: second\n";
  std::string first = first_compiler_error(log);
  EXPECT_EQ(first.rfind("kernels/a.cu(12): error: identifier", 0), 0u);
  std::string report = trim_compiler_log(log);
  EXPECT_EQ(report.rfind("first error:\nkernels/a.cu(12)", 0), 0u);
  EXPECT_NE(report.find("lines cut"), std::string::npos);
}

TEST(CompilerLog, NoErrorMeansNoLiftedLine) {
  EXPECT_EQ(first_compiler_error("warning: unused variable\n"), "");
}

TEST(LastLine, SkipsTrailingBlankLines) {
  EXPECT_EQ(last_line("Traceback\n  File x\nValueError: bad\n\n  \n"), "ValueError: bad");
}

}  // namespace
}  // namespace cuda_agent

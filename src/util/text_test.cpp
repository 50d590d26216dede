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

TEST(Trim, TakesSpacesTabsAndLineEndsFromBothEnds) {
  EXPECT_EQ(trim(" \t a b \r\n"), "a b");
  EXPECT_EQ(trim(" \n "), "");
  EXPECT_EQ(trim("x"), "x");
}

TEST(ValidUtf8, KeepsWellFormedTextAndReplacesTheRest) {
  EXPECT_EQ(valid_utf8("plain ascii\n"), "plain ascii\n");
  EXPECT_EQ(valid_utf8("\xC3\xA9t\xC3\xA9 \xE2\x9C\x93 \xF0\x9F\x98\x80"),
            "\xC3\xA9t\xC3\xA9 \xE2\x9C\x93 \xF0\x9F\x98\x80");
  EXPECT_EQ(valid_utf8("a\xFF"
                       "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(valid_utf8("cut \xE2\x9C"), "cut \xEF\xBF\xBD\xEF\xBF\xBD");  // half a character
  EXPECT_EQ(valid_utf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");          // overlong '/'
  EXPECT_EQ(valid_utf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // a surrogate
  EXPECT_EQ(valid_utf8(std::string("a\0b", 3)), std::string("a\0b", 3));
}

TEST(SplitLines, AFinalLineEndStartsNoLineAndCarriageReturnsGoOnRequest) {
  EXPECT_EQ(split_lines("a\nb\n"), (std::vector<std::string_view>{"a", "b"}));
  EXPECT_EQ(split_lines("a\n\nb"), (std::vector<std::string_view>{"a", "", "b"}));
  EXPECT_TRUE(split_lines("").empty());
  EXPECT_EQ(split_lines("a\r\nb"), (std::vector<std::string_view>{"a\r", "b"}));
  EXPECT_EQ(split_lines("a\r\nb", true), (std::vector<std::string_view>{"a", "b"}));
}

}  // namespace
}  // namespace cuda_agent

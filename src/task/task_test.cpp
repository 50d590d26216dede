#include "task/task.h"

#include <gtest/gtest.h>

#include "util/files.h"

namespace cuda_agent {
namespace {

const char* kKernelBenchStyle = R"(import torch
import torch.nn as nn

class Model(nn.Module):
    """Performs a ReLU activation."""
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)

batch_size = 16
dim = 16384

def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]

def get_init_inputs():
    return []  # No special initialization inputs needed
)";

TEST(Task, LoadsAKernelBenchStyleFile) {
  TempDir dir;
  auto path = dir.path() / "19_ReLU.py";
  ASSERT_TRUE(write_file_atomic(path, kKernelBenchStyle).ok());
  Task task;
  Status s = load_task(path, &task);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(task.id, "19_ReLU");
  EXPECT_EQ(task.sha256.size(), 64u);
  EXPECT_TRUE(task.path.is_absolute());
}

TEST(Task, MissingDefinitionsAreNamedWithTheFile) {
  std::string source = kKernelBenchStyle;
  source.replace(source.find("def get_inputs"), 14, "def make_inputs");
  Status s = check_task_source(source, "tasks/broken.py");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("tasks/broken.py"), std::string::npos);
  EXPECT_NE(s.message().find("get_inputs()"), std::string::npos);
  EXPECT_EQ(s.message().find("get_init_inputs() ("), std::string::npos);
}

TEST(Task, NestedDefinitionsDoNotCount) {
  Status s = check_task_source(
      "class Model(nn.Module):\n    def get_inputs(self):\n        pass\n"
      "def get_init_inputs():\n    return []\n",
      "nested.py");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("get_inputs()"), std::string::npos);
}

TEST(Task, AllThreeMissingAreListed) {
  Status s = check_task_source("print('hello')\n", "empty.py");
  EXPECT_NE(s.message().find("class Model, def get_inputs() and def get_init_inputs()"),
            std::string::npos)
      << s.message();
}

TEST(Task, MissingFileIsAClearError) {
  Task task;
  Status s = load_task("/nonexistent/task.py", &task);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent/task.py does not exist"), std::string::npos);
}

}  // namespace
}  // namespace cuda_agent

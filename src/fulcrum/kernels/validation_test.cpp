// Bad input is rejected with an Error naming the field, before any output is written.
#include "fulcrum/kernels/kernel_test_cases.hpp"

#include "fulcrum/core/error.hpp"

#include <gtest/gtest.h>

namespace fulcrum::kernels {
namespace {

struct Buffers {
  AttentionShape shape{4, 2, 64, 0};
  Tokens rows = 100;
  std::vector<float> q, k, v, o, lse, dq, dk, dv;
  std::vector<AttentionTask> tasks;
  Buffers() {
    q.assign(static_cast<std::size_t>(rows * 4 * 64), 1.0f);
    k.assign(static_cast<std::size_t>(rows * 2 * 64), 1.0f);
    v = k;
    o.assign(q.size(), 3.0f);
    lse.assign(static_cast<std::size_t>(rows * 4), 3.0f);
    dq = q;
    dk = k;
    dv = v;
    tasks = {{{0, {RowSpan{0, 0, 50}, RowSpan{}}, {0, 0, 50}}, 50, MaskSpec::causal()},
             {{0, {RowSpan{50, 0, 50}, RowSpan{}}, {50, 0, 50}}, 50, MaskSpec::causal()}};
  }
  void forward(int q_heads_view = 4) {
    attention_forward<float>(tasks, shape, {q.data(), rows, q_heads_view, 64}, {k.data(), rows, 2, 64},
                             {v.data(), rows, 2, 64}, {o.data(), rows, 4, 64}, {lse.data(), rows, 4, 1});
  }
  void backward() {
    attention_backward<float>(tasks, shape, {q.data(), rows, 4, 64}, {k.data(), rows, 2, 64}, {v.data(), rows, 2, 64},
                              {o.data(), rows, 4, 64}, {o.data(), rows, 4, 64}, {lse.data(), rows, 4, 1},
                              {dq.data(), rows, 4, 64}, {dk.data(), rows, 2, 64}, {dv.data(), rows, 2, 64});
  }
};

void expect_error(Buffers& b, const std::string& field, bool backward = false) {
  try {
    backward ? b.backward() : b.forward();
    FAIL() << "expected an error naming " << field;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
  }
  for (float x : b.o) ASSERT_EQ(x, 3.0f) << "output written before the input was checked";
}

TEST(KernelValidation, ShapesAndHeadCounts) {
  Buffers b;
  b.shape.q_heads = 5;
  expect_error(b, "q_heads = 5: must be a multiple of kv_heads = 2");
  Buffers c;
  try {
    c.forward(3);
    FAIL() << "expected an error naming q";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q: shape [100, 3, 64]"), std::string::npos) << e.what();
  }
}

TEST(KernelValidation, TaskRangesMustStayInsideTheirBuffersAndDocument) {
  Buffers b;
  b.tasks[1].keys = {80, 0, 50};
  expect_error(b, "tasks[1].keys: rows [80, 130) leave the K/V buffer (100 rows)");
  Buffers c;
  c.tasks[0].queries[0].position = 10;
  expect_error(c, "tasks[0].queries[0]: positions [10, 60) leave the document (50 tokens)");
  Buffers d;
  d.tasks[0].queries[1] = {45, 45, 5};
  expect_error(d, "overlap rows of tasks[0]");
  Buffers e;
  e.tasks[0].doc_len = 0;
  expect_error(e, "tasks[0].doc_len = 0", true);
  Buffers f;  // 50 tokens striped over 4 ranks
  const std::vector<MaskSpec> heads = {MaskSpec::causal(), MaskSpec::causal(),
                                       MaskSpec::striped(MaskSpec::causal(), 4, 1), MaskSpec::causal()};
  f.tasks[1].head_masks = heads;
  expect_error(f,
               "tasks[1].head_masks[2]: mask striped = 'striped:4:1:causal': document length = 50 must be a multiple");
}

}  // namespace
}  // namespace fulcrum::kernels

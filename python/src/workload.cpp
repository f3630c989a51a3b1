// Workloads: model shapes, masks, documents, batches, length sources and the batch stream.
#include "bindings.hpp"
#include "fulcrum/workload/batch.hpp"
#include "fulcrum/workload/length_source.hpp"
#include "fulcrum/workload/model_config.hpp"

namespace fulcrum::python {
namespace {

// A slot or position of a doc_len-token document that `mask` accepts.
void check_slot(const MaskSpec& mask, std::string_view name, Tokens value, Tokens doc_len) {
  if (doc_len < 1) fail("doc_len = {}: must be >= 1", doc_len);
  mask.check_length(doc_len, "doc_len");
  if (value < 0 || value >= doc_len) fail("{} = {}: must be in [0, doc_len = {})", name, value, doc_len);
}

// Lengths from per-rank cu_seqlens, which may be any sequence of integers: lists, NumPy arrays, CPU or
// CUDA torch tensors (read through their tolist(): one device copy, not one per entry).
Batch batch_from_cu_seqlens(const py::sequence& per_rank, const MaskSpec& mask, Tokens tokens_per_rank,
                            std::int64_t first_id) {
  std::vector<std::vector<Tokens>> lengths;
  for (std::size_t r = 0; r < per_rank.size(); ++r) {
    py::object entries = per_rank[r];
    if (py::hasattr(entries, "tolist")) entries = entries.attr("tolist")();
    std::vector<Tokens> offsets;
    for (const auto& entry : py::cast<py::iterable>(entries))
      offsets.push_back(py::int_(py::reinterpret_borrow<py::object>(entry)).cast<Tokens>());
    if (offsets.empty() || offsets.front() != 0) {
      fail("per_rank_cu_seqlens[{}]: must start with 0 (FlashAttention's cu_seqlens: 0, l1, l1+l2, ...)", r);
    }
    auto& rank_lengths = lengths.emplace_back();
    for (std::size_t i = 1; i < offsets.size(); ++i) {
      if (offsets[i] <= offsets[i - 1]) {
        fail(
            "per_rank_cu_seqlens[{}][{}] = {}: must be greater than the entry before ({}); empty sequences are "
            "not documents",
            r, i, offsets[i], offsets[i - 1]);
      }
      rank_lengths.push_back(offsets[i] - offsets[i - 1]);
    }
  }
  return batch_from_rank_layout(lengths, tokens_per_rank, mask, first_id);
}

}  // namespace

void bind_workload(py::module_& m) {
  py::class_<ModelShape>(m, "ModelShape", "Transformer shape: heads, head dim, hidden sizes, layers, dtype.")
      .def(py::init<>())
      .def_readwrite("name", &ModelShape::name)
      .def_readwrite("layers", &ModelShape::layers)
      .def_readwrite("hidden", &ModelShape::hidden)
      .def_readwrite("q_heads", &ModelShape::q_heads)
      .def_readwrite("kv_heads", &ModelShape::kv_heads)
      .def_readwrite("head_dim", &ModelShape::head_dim)
      .def_readwrite("ffn_hidden", &ModelShape::ffn_hidden)
      .def_readwrite("dtype_bytes", &ModelShape::dtype_bytes)
      .def_readwrite("rms_norm_eps", &ModelShape::rms_norm_eps)
      .def_readwrite("rope_theta", &ModelShape::rope_theta)
      .def("validate", &ModelShape::validate, "Raises fulcrum.InputError naming a bad field.")
      .def("__repr__", [](const ModelShape& s) {
        return fmt::format("ModelShape('{}', layers={}, q_heads={}, kv_heads={}, head_dim={})", s.name, s.layers,
                           s.q_heads, s.kv_heads, s.head_dim);
      });
  m.def(
      "model_shape",
      [](const py::object& source) {
        // A transformers PretrainedConfig hands over its dict; its name_or_path names it.
        if (py::hasattr(source, "to_dict") && !py::isinstance<py::dict>(source)) {
          const std::string name = py::str(py::getattr(source, "name_or_path", py::str("")));
          return model_shape_from_json(python_to_json(source.attr("to_dict")()), name);
        }
        if (py::isinstance<py::dict>(source)) {
          const py::dict d = source.cast<py::dict>();
          const std::string name = d.contains("name") ? py::str(d["name"]).cast<std::string>() : "";
          return model_shape_from_json(python_to_json(source), name);
        }
        return resolve_model_shape(py::module_::import("os").attr("fspath")(source).cast<std::string>());
      },
      py::arg("source"),
      "A ModelShape from a preset name, a model file's path (a Hugging Face config.json or a Fulcrum model "
      ".json), a config dict, or a transformers PretrainedConfig; what the CLI's --model accepts.");
  m.def(
      "model_shape_json", [](const ModelShape& s) { return json_to_python(model_shape_json(s)); }, py::arg("shape"),
      "The Fulcrum model file's dict for `shape` (what read_model_file and model_shape read back).");
  m.def("model_shape_names", &model_shape_preset_names);

  py::class_<MaskSpec>(m, "Mask", "An attention mask, written as in the CLI: 'causal', 'window:W', ...")
      .def(py::init([](std::string_view text) { return MaskSpec::parse(text); }), py::arg("spec") = "causal")
      .def_property_readonly("kind", [](const MaskSpec& s) { return s.to_string().substr(0, s.to_string().find(':')); })
      .def("__str__", &MaskSpec::to_string)
      .def("__repr__", [](const MaskSpec& s) { return fmt::format("Mask('{}')", s.to_string()); })
      .def("__eq__", [](const MaskSpec& a, const MaskSpec& b) { return a.to_string() == b.to_string(); })
      .def_static("vertical_slash_blocks", &MaskSpec::vertical_slash_blocks, py::arg("block"), py::arg("verticals"),
                  py::arg("block_offsets"),
                  "MTraining's blockified vertical-slash mask: (q, k) visible iff k <= q and q // block - k // block "
                  "is in block_offsets or k is in verticals ('vsblocks:G:V1,..:D1,..').")
      .def_static("striped", &MaskSpec::striped, py::arg("inner"), py::arg("ranks"), py::arg("block"),
                  "`inner` over a document stored block-striped over `ranks` ranks in `block`-token blocks "
                  "('striped:W:G:INNER'); document lengths must be multiples of ranks * block.")
      .def_property_readonly(
          "window", [](const MaskSpec& s) { return s.window; },
          "Keys a row sees back from itself, itself included: window:W and lambda's W; 0 for the other kinds.")
      .def_property_readonly(
          "sink", [](const MaskSpec& s) { return s.sink; },
          "Leading keys every row sees: lambda's SINK; 0 for the others.")
      .def_property_readonly("length_multiple", &MaskSpec::length_multiple,
                             "Document lengths this mask accepts are multiples of this (ranks * block for striped).")
      .def(
          "source_position",
          [](const MaskSpec& s, Tokens slot, Tokens doc_len) {
            check_slot(s, "slot", slot, doc_len);
            return s.source_position(slot, doc_len);
          },
          py::arg("slot"), py::arg("doc_len"),
          "The original position that slot `slot` holds (striped masks; the identity for other kinds).")
      .def(
          "slot_of",
          [](const MaskSpec& s, Tokens position, Tokens doc_len) {
            check_slot(s, "position", position, doc_len);
            return s.slot_of(position, doc_len);
          },
          py::arg("position"), py::arg("doc_len"), "The slot that holds original position `position`.");
  py::implicitly_convertible<std::string, MaskSpec>();

  py::class_<Document>(m, "Document")
      .def(py::init([](std::int64_t id, Tokens length, const MaskSpec& mask) {
             if (length < 1) fail("document {}: length = {}: must be >= 1", id, length);
             mask.check_length(length, fmt::format("document {}", id));
             return Document{id, length, mask};
           }),
           py::arg("id"), py::arg("length"), py::arg("mask") = MaskSpec::causal())
      .def_readwrite("id", &Document::id)
      .def_readwrite("length", &Document::length)
      .def_readwrite("mask", &Document::mask)
      .def_readwrite("head_masks", &Document::head_masks,
                     "One mask per q head, or empty for `mask` on every head (checked against the model by compile)")
      .def("__repr__", [](const Document& d) { return fmt::format("Document(id={}, length={})", d.id, d.length); });

  py::class_<Segment>(m, "Segment", "Tokens [begin, end) of documents[doc] live on `rank`.")
      .def_readonly("doc", &Segment::doc)
      .def_property_readonly("tokens", [](const Segment& s) { return to_tuple(s.tokens); })
      .def_readonly("rank", &Segment::rank);

  py::class_<Batch>(m, "Batch", "Documents and where their tokens live (one Segment per piece on a rank).")
      .def_readonly("ranks", &Batch::ranks)
      .def_readonly("tokens_per_rank", &Batch::tokens_per_rank)
      .def_readonly("documents", &Batch::documents)
      .def_readonly("segments", &Batch::segments)
      .def("total_tokens", &Batch::total_tokens)
      .def(
          "segment_array",
          [](const Batch& b) {
            std::vector<std::int64_t> values;
            for (const Segment& s : b.segments)
              values.insert(values.end(), {s.doc, s.tokens.begin, s.tokens.end, s.rank});
            return int_array({static_cast<py::ssize_t>(b.segments.size()), 4}, values);
          },
          "int64 [segments, 4]: document index, token begin, token end, rank.")
      .def_static("from_cu_seqlens", &batch_from_cu_seqlens, py::arg("per_rank_cu_seqlens"), py::kw_only(),
                  py::arg("mask") = MaskSpec::causal(), py::arg("tokens_per_rank") = 0, py::arg("first_id") = 0,
                  "Exactly the layout a data loader produced: rank r holds the sequences of its FlashAttention "
                  "cu_seqlens (0, l1, l1+l2, ...; a list, NumPy array or torch tensor), each a whole document. "
                  "tokens_per_rank: the per-rank budget (0: the largest rank's total). Anything malformed or "
                  "over budget raises fulcrum.InputError naming the entry; nothing is dropped.")
      .def("__repr__", [](const Batch& b) {
        return fmt::format("Batch(ranks={}, tokens_per_rank={}, documents={})", b.ranks, b.tokens_per_rank,
                           b.documents.size());
      });
  m.def(
      "pack_batch",
      [](const std::vector<Document>& documents, int ranks, Tokens tokens_per_rank, const std::string& boundary_split) {
        return pack_batch(documents, ranks, tokens_per_rank, parse_boundary_split(boundary_split, "boundary_split"));
      },
      py::arg("documents"), py::arg("ranks"), py::arg("tokens_per_rank"), py::kw_only(),
      py::arg("boundary_split") = "contiguous",
      "Packs documents in order into `ranks` budgets of `tokens_per_rank` tokens (DistCA's placement); a "
      "document crossing ranks is one piece per rank ('contiguous') or a head and a tail piece per rank "
      "('head-tail'). Documents that do not all fit raise fulcrum.InputError naming the first one cut "
      "(nothing is dropped).");

  // Shared ownership: a BatchStream keeps drawing from the source after Python drops its own handle.
  py::class_<LengthSource, std::shared_ptr<LengthSource>>(m, "LengthSource", "A seeded source of document lengths.")
      .def("next", &LengthSource::next)
      .def(
          "take",
          [](LengthSource& s, py::ssize_t count) {
            if (count < 0) fail("count = {}: must be >= 0", count);
            std::vector<std::int64_t> values(static_cast<std::size_t>(count));
            for (auto& v : values) v = s.next();
            return int_array({count}, values);
          },
          py::arg("count"), "The next `count` lengths as an int64 array.")
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", &LengthSource::next);
  m.def(
      "make_length_source",
      [](std::string_view spec, std::uint64_t seed, Tokens tokens_per_rank) {
        return std::shared_ptr<LengthSource>(make_length_source(spec, seed, tokens_per_rank));
      },
      py::arg("spec"), py::arg("seed") = 0, py::arg("tokens_per_rank") = 65536,
      "pretrain | prolong | uniform:MIN:MAX | lognormal:MU:SIGMA | file:PATH");

  py::class_<BatchStream>(m, "BatchStream", "An endless stream of packed batches drawn from a LengthSource.")
      .def(py::init([](std::shared_ptr<LengthSource> source, int ranks, Tokens tokens_per_rank, const MaskSpec& mask,
                       const std::string& boundary_split) {
             if (!source) fail("source = None: must be a LengthSource (fulcrum.make_length_source)");
             validate_batch_shape(ranks, tokens_per_rank);
             return BatchStream([source] { return source->next(); }, ranks, tokens_per_rank, mask,
                                parse_boundary_split(boundary_split, "boundary_split"));
           }),
           py::arg("source"), py::arg("ranks"), py::arg("tokens_per_rank"), py::arg("mask") = MaskSpec::causal(),
           py::kw_only(), py::arg("boundary_split") = "contiguous")
      .def("next", &BatchStream::next)
      .def("__iter__", [](py::object self) { return self; })
      .def("__next__", &BatchStream::next);
}

}  // namespace fulcrum::python

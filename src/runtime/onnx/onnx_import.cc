#include "runtime/onnx/onnx_import.h"

#include <onnx/onnx_pb.h>

#include "runtime/ir/onnx_types.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

namespace inferd::runtime {
namespace {

namespace fs = std::filesystem;

StatusOr<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot open " + path.string());
  std::ostringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

// A model file mapped read-only: protobuf parses it from the page cache, with no copy of the file
// on the heap (reading it into a string took the file's size twice over, the stream's buffer and
// the string, on top of what the parse keeps).
class MappedFile {
 public:
  static StatusOr<MappedFile> Open(const fs::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::NotFound("cannot open " + path.string());
    struct stat info{};
    if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
      ::close(fd);
      return Status::InvalidArgument(path.string() + " is not a regular file");
    }
    MappedFile file;
    file.size_ = static_cast<size_t>(info.st_size);
    if (file.size_ > 0) {
      void* data = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (data == MAP_FAILED) {
        ::close(fd);
        return Status::Internal("cannot map " + path.string());
      }
      ::madvise(data, file.size_, MADV_SEQUENTIAL);  // read once, front to back
      file.data_ = static_cast<const char*>(data);
    }
    ::close(fd);
    return file;
  }
  MappedFile(MappedFile&& other) noexcept : data_(std::exchange(other.data_, nullptr)), size_(other.size_) {}
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile& operator=(MappedFile&&) = delete;
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
  }
  const char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  MappedFile() = default;
  const char* data_ = nullptr;
  size_t size_ = 0;
};

// External data must stay inside the model's folder: a model file must not read /etc/shadow.
StatusOr<std::string> ReadExternalData(const onnx::TensorProto& proto, const fs::path& base_dir) {
  std::string location;
  int64_t offset = 0;
  int64_t length = -1;
  for (const auto& entry : proto.external_data()) {
    if (entry.key() == "location") location = entry.value();
    if (entry.key() != "offset" && entry.key() != "length") continue;
    int64_t number = 0;
    const std::string& text = entry.value();
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
    if (error != std::errc() || end != text.data() + text.size()) {
      return Status::InvalidArgument("tensor '" + proto.name() + "': external data " + entry.key() + " '" + text +
                                     "' is not a number");
    }
    (entry.key() == "offset" ? offset : length) = number;
  }
  fs::path relative(location);
  if (location.empty() || relative.is_absolute()) {
    return Status::InvalidArgument("tensor '" + proto.name() + "': external data location '" + location +
                                   "' must be a relative path");
  }
  for (const auto& part : relative) {
    if (part == "..") {
      return Status::InvalidArgument("tensor '" + proto.name() + "': external data location '" + location +
                                     "' leaves the model folder");
    }
  }
  std::ifstream in(base_dir / relative, std::ios::binary);
  if (!in) return Status::NotFound("tensor '" + proto.name() + "': cannot open external data " + location);
  in.seekg(0, std::ios::end);
  const int64_t file_size = in.tellg();
  if (length < 0) length = file_size - offset;
  if (offset < 0 || length < 0 || offset + length > file_size) {
    return Status::InvalidArgument("tensor '" + proto.name() + "': external data range is outside " + location);
  }
  std::string data(static_cast<size_t>(length), '\0');
  in.seekg(offset);
  in.read(data.data(), length);
  return data;
}

template <typename Dst, typename Field>
void CopyConverted(const Field& field, uint8_t* out) {
  Dst* dst = reinterpret_cast<Dst*>(out);
  for (int i = 0; i < field.size(); ++i) dst[i] = static_cast<Dst>(field.Get(i));
}

// Copies the typed repeated field that holds this element type (ONNX packs small ints, bool and
// fp16 into int32_data).
Status CopyTypedField(const onnx::TensorProto& proto, DataType dtype, int64_t elements, uint8_t* out) {
  auto check = [&](int size) -> Status {
    if (size != elements) {
      return Status::InvalidArgument("tensor '" + proto.name() + "' has " + std::to_string(size) +
                                     " values for " + std::to_string(elements) + " elements");
    }
    return Status::Ok();
  };
  switch (dtype) {
    case DataType::kFp32:
      RETURN_IF_ERROR(check(proto.float_data_size()));
      if (elements > 0) std::memcpy(out, proto.float_data().data(), elements * sizeof(float));
      return Status::Ok();
    case DataType::kFp64:
      RETURN_IF_ERROR(check(proto.double_data_size()));
      if (elements > 0) std::memcpy(out, proto.double_data().data(), elements * sizeof(double));
      return Status::Ok();
    case DataType::kInt64:
      RETURN_IF_ERROR(check(proto.int64_data_size()));
      if (elements > 0) std::memcpy(out, proto.int64_data().data(), elements * sizeof(int64_t));
      return Status::Ok();
    case DataType::kUint32:
      RETURN_IF_ERROR(check(proto.uint64_data_size()));
      CopyConverted<uint32_t>(proto.uint64_data(), out);
      return Status::Ok();
    case DataType::kUint64:
      RETURN_IF_ERROR(check(proto.uint64_data_size()));
      CopyConverted<uint64_t>(proto.uint64_data(), out);
      return Status::Ok();
    case DataType::kInt32:
      RETURN_IF_ERROR(check(proto.int32_data_size()));
      CopyConverted<int32_t>(proto.int32_data(), out);
      return Status::Ok();
    case DataType::kInt16:
      RETURN_IF_ERROR(check(proto.int32_data_size()));
      CopyConverted<int16_t>(proto.int32_data(), out);
      return Status::Ok();
    case DataType::kInt8:
      RETURN_IF_ERROR(check(proto.int32_data_size()));
      CopyConverted<int8_t>(proto.int32_data(), out);
      return Status::Ok();
    case DataType::kUint16:
    case DataType::kFp16:
    case DataType::kBf16:
      RETURN_IF_ERROR(check(proto.int32_data_size()));
      CopyConverted<uint16_t>(proto.int32_data(), out);
      return Status::Ok();
    case DataType::kUint8:
      RETURN_IF_ERROR(check(proto.int32_data_size()));
      CopyConverted<uint8_t>(proto.int32_data(), out);
      return Status::Ok();
    case DataType::kBool:
      RETURN_IF_ERROR(check(proto.int32_data_size()));
      for (int i = 0; i < proto.int32_data_size(); ++i) out[i] = proto.int32_data(i) != 0;
      return Status::Ok();
    default:
      return Status::Unimplemented("tensor '" + proto.name() + "': unsupported element type");
  }
}

StatusOr<Tensor> StringTensorFromProto(const onnx::TensorProto& proto, Shape shape) {
  std::string serialized;
  for (const std::string& element : proto.string_data()) {
    uint32_t length = static_cast<uint32_t>(element.size());
    serialized.append(reinterpret_cast<const char*>(&length), 4);
    serialized += element;
  }
  auto owner = std::make_shared<std::string>(std::move(serialized));
  Tensor tensor;
  tensor.name = proto.name();
  tensor.dtype = DataType::kBytes;
  tensor.shape = std::move(shape);
  tensor.byte_size = owner->size();
  tensor.data = AliasData(owner, owner->data());
  return tensor;
}

StatusOr<ValueInfo> ValueInfoFromProto(const onnx::ValueInfoProto& proto) {
  ValueInfo info;
  info.name = proto.name();
  if (!proto.has_type() || !proto.type().has_tensor_type()) return info;  // sequences etc.: type unknown
  const auto& tensor_type = proto.type().tensor_type();
  info.dtype = DataTypeFromOnnx(tensor_type.elem_type());
  if (tensor_type.has_shape()) {
    std::vector<Dim> dims;
    for (const auto& dim : tensor_type.shape().dim()) {
      Dim d;
      if (dim.has_dim_value()) d.value = dim.dim_value();
      if (dim.has_dim_param()) d.symbol = dim.dim_param();
      dims.push_back(std::move(d));
    }
    info.shape = std::move(dims);
  }
  return info;
}

StatusOr<Attribute> AttributeFromProto(const onnx::AttributeProto& proto, const fs::path& base_dir) {
  Attribute attribute;
  using A = onnx::AttributeProto;
  switch (proto.type()) {
    case A::FLOAT:
      attribute.kind = Attribute::Kind::kFloat;
      attribute.f = proto.f();
      break;
    case A::INT:
      attribute.kind = Attribute::Kind::kInt;
      attribute.i = proto.i();
      break;
    case A::STRING:
      attribute.kind = Attribute::Kind::kString;
      attribute.s = proto.s();
      break;
    case A::TENSOR: {
      attribute.kind = Attribute::Kind::kTensor;
      ASSIGN_OR_RETURN(attribute.t, TensorFromProto(proto.t(), base_dir));
      break;
    }
    case A::FLOATS:
      attribute.kind = Attribute::Kind::kFloats;
      attribute.floats.assign(proto.floats().begin(), proto.floats().end());
      break;
    case A::INTS:
      attribute.kind = Attribute::Kind::kInts;
      attribute.ints.assign(proto.ints().begin(), proto.ints().end());
      break;
    case A::STRINGS:
      attribute.kind = Attribute::Kind::kStrings;
      attribute.strings.assign(proto.strings().begin(), proto.strings().end());
      break;
    case A::GRAPH:
      attribute.kind = Attribute::Kind::kGraph;  // the importer fills in the subgraph
      break;
    case A::TYPE_PROTO:
      attribute.kind = Attribute::Kind::kType;  // Optional's element type: no kernel needs it
      break;
    default:
      return Status::Unimplemented("attribute '" + proto.name() + "' has an unsupported type");
  }
  return attribute;
}

// TensorFromProto, but an initializer's raw data moves into the tensor rather than being copied
// (the string's heap block becomes the tensor's memory: malloc aligns it for every element type).
StatusOr<Tensor> TakeTensorFromProto(onnx::TensorProto& proto, const fs::path& base_dir) {
  const DataType dtype = DataTypeFromOnnx(proto.data_type());
  if (dtype == DataType::kInvalid || dtype == DataType::kBytes || proto.has_segment() ||
      proto.data_location() == onnx::TensorProto::EXTERNAL || !proto.has_raw_data()) {
    return TensorFromProto(proto, base_dir);
  }
  Shape shape(proto.dims().begin(), proto.dims().end());
  ASSIGN_OR_RETURN(int64_t elements, ElementCount(shape));
  const size_t bytes = static_cast<size_t>(elements) * DataTypeSize(dtype);
  auto raw = std::make_shared<std::string>(std::move(*proto.mutable_raw_data()));
  proto.clear_raw_data();
  const bool aligned = reinterpret_cast<uintptr_t>(raw->data()) % alignof(std::max_align_t) == 0;
  if (raw->size() != bytes || bytes == 0 || !aligned) {
    proto.set_raw_data(std::move(*raw));  // the copying path checks and reports it
    return TensorFromProto(proto, base_dir);
  }
  Tensor tensor;
  tensor.name = proto.name();
  tensor.dtype = dtype;
  tensor.shape = std::move(shape);
  tensor.byte_size = bytes;
  tensor.data = AliasData(raw, reinterpret_cast<const uint8_t*>(raw->data()));
  return tensor;
}

// Imports one graph: the model's, or (recursively) a subgraph of a node attribute. A subgraph may
// read any value of an enclosing graph by name; such a name becomes one of its "captures", a graph
// input after its formal ones, and the enclosing node gets it as an implicit input.
class GraphImporter {
 public:
  GraphImporter(Graph* graph, const fs::path& base_dir, bool is_subgraph)
      : graph_(graph), base_dir_(base_dir), is_subgraph_(is_subgraph) {}

  // `g` is the importer's to consume: initializers' raw data moves into their tensors, no copy.
  Status Import(onnx::GraphProto& g) {
    for (auto& initializer : *g.mutable_initializer()) {
      ASSIGN_OR_RETURN(Tensor tensor, TakeTensorFromProto(initializer, base_dir_));
      ValueId id = Define(initializer.name());
      graph_->values[id].dtype = tensor.dtype;
      std::vector<Dim> dims;
      for (int64_t d : tensor.shape) dims.push_back({.value = d});
      graph_->values[id].shape = std::move(dims);
      graph_->initializers[id] = std::move(tensor);
    }
    for (const auto& input : g.input()) {
      // Before IR v4 every initializer was also listed as an input; it stays a constant.
      if (Known(input.name())) continue;
      ASSIGN_OR_RETURN(ValueInfo info, ValueInfoFromProto(input));
      ValueId id = Define(input.name());
      graph_->values[id] = std::move(info);
      graph_->inputs.push_back(id);
    }
    for (const auto& node_proto : g.node()) RETURN_IF_ERROR(ImportNode(node_proto));
    for (const auto& output : g.output()) {
      ASSIGN_OR_RETURN(ValueInfo info, ValueInfoFromProto(output));
      ValueId id = Use(output.name());
      if (graph_->values[id].dtype == DataType::kInvalid) graph_->values[id].dtype = info.dtype;
      if (!graph_->values[id].shape) graph_->values[id].shape = info.shape;
      graph_->outputs.push_back(id);
    }
    for (const auto& value_info : g.value_info()) {
      if (!Known(value_info.name())) continue;
      ASSIGN_OR_RETURN(ValueInfo info, ValueInfoFromProto(value_info));
      ValueInfo& known = graph_->values[Define(value_info.name())];
      if (known.dtype == DataType::kInvalid) known.dtype = info.dtype;
      if (!known.shape) known.shape = info.shape;
    }
    // Captures follow the formal inputs, in the order they were first read.
    for (const std::string& name : captures_) graph_->inputs.push_back(ids_.at(name));
    return graph_->CheckTopologicalOrder();
  }

  const std::vector<std::string>& captures() const { return captures_; }

 private:
  ValueId Define(const std::string& name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    ValueId id = graph_->AddValue({.name = name});
    ids_.emplace(name, id);
    return id;
  }
  bool Known(const std::string& name) const { return ids_.count(name) > 0; }

  // A value read here: defined in this graph, or else, in a subgraph, captured from an enclosing
  // one. (In the model's graph an undefined name is reported by CheckTopologicalOrder.)
  ValueId Use(const std::string& name) {
    if (Known(name)) return ids_.at(name);
    ValueId id = Define(name);
    if (is_subgraph_) captures_.push_back(name);
    return id;
  }

  Status ImportNode(const onnx::NodeProto& node_proto) {
    Node node;
    node.name = node_proto.name();
    node.op_type = node_proto.op_type();
    node.domain = node_proto.domain();
    for (const auto& name : node_proto.input()) node.inputs.push_back(name.empty() ? kNoValue : Use(name));
    std::vector<std::string> implicit;  // outer values the node's subgraphs read, in order
    for (const auto& attribute : node_proto.attribute()) {
      if (attribute.type() == onnx::AttributeProto::GRAPHS)
        return Status::Unimplemented(node.Describe() + ": attribute '" + attribute.name() + "' holds a list of graphs");
      auto converted = AttributeFromProto(attribute, base_dir_);
      if (!converted.ok()) return converted.status().WithPrefix(node.Describe());
      if (attribute.type() == onnx::AttributeProto::GRAPH) {
        auto subgraph = std::make_shared<Graph>();
        subgraph->opset = graph_->opset;
        GraphImporter importer(subgraph.get(), base_dir_, /*is_subgraph=*/true);
        onnx::GraphProto body = attribute.g();  // a copy to consume (subgraphs are small)
        if (Status status = importer.Import(body); !status.ok())
          return status.WithPrefix(node.Describe() + " subgraph '" + attribute.name() + "'");
        for (const std::string& name : importer.captures()) {
          auto at = std::find(implicit.begin(), implicit.end(), name);
          if (at == implicit.end()) at = implicit.insert(implicit.end(), name);
          converted->capture_slots.push_back(static_cast<size_t>(at - implicit.begin()));
        }
        converted->graph = std::move(subgraph);
      }
      node.attributes.emplace(attribute.name(), std::move(converted).value());
    }
    for (const std::string& name : implicit) node.inputs.push_back(Use(name));
    node.implicit_input_count = implicit.size();
    for (const auto& name : node_proto.output()) node.outputs.push_back(name.empty() ? kNoValue : Define(name));
    graph_->nodes.push_back(std::move(node));
    return Status::Ok();
  }

  Graph* graph_;
  const fs::path& base_dir_;
  const bool is_subgraph_;
  std::map<std::string, ValueId> ids_;
  std::vector<std::string> captures_;
};

}  // namespace

StatusOr<Tensor> TensorFromProto(const onnx::TensorProto& proto, const fs::path& base_dir) {
  DataType dtype = DataTypeFromOnnx(proto.data_type());
  if (dtype == DataType::kInvalid) {
    return Status::Unimplemented("tensor '" + proto.name() + "' has unsupported element type " +
                                 std::to_string(proto.data_type()));
  }
  if (proto.has_segment()) return Status::Unimplemented("tensor '" + proto.name() + "' is segmented");
  Shape shape(proto.dims().begin(), proto.dims().end());
  ASSIGN_OR_RETURN(int64_t elements, ElementCount(shape));
  if (dtype == DataType::kBytes) return StringTensorFromProto(proto, std::move(shape));

  const size_t bytes = static_cast<size_t>(elements) * DataTypeSize(dtype);
  // The source must hold every byte before anything is allocated: a corrupt or hostile file may
  // claim any shape.
  MutableBuffer buffer;
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    ASSIGN_OR_RETURN(std::string data, ReadExternalData(proto, base_dir));
    if (data.size() != bytes) {
      return Status::InvalidArgument("tensor '" + proto.name() + "': external data has " +
                                     std::to_string(data.size()) + " bytes, expected " + std::to_string(bytes));
    }
    buffer = AllocateBuffer(std::max<size_t>(bytes, 1));
    std::memcpy(buffer.get(), data.data(), bytes);
  } else if (proto.has_raw_data()) {
    if (proto.raw_data().size() != bytes) {
      return Status::InvalidArgument("tensor '" + proto.name() + "': raw_data has " +
                                     std::to_string(proto.raw_data().size()) + " bytes, expected " +
                                     std::to_string(bytes));
    }
    buffer = AllocateBuffer(std::max<size_t>(bytes, 1));
    std::memcpy(buffer.get(), proto.raw_data().data(), bytes);
  } else {
    const int64_t available = std::max({proto.float_data_size(), proto.double_data_size(), proto.int32_data_size(),
                                        proto.int64_data_size(), proto.uint64_data_size()});
    if (available < elements) {
      return Status::InvalidArgument("tensor '" + proto.name() + "' has " + std::to_string(available) +
                                     " values for shape " + ShapeToString(shape));
    }
    buffer = AllocateBuffer(std::max<size_t>(bytes, 1));
    RETURN_IF_ERROR(CopyTypedField(proto, dtype, elements, buffer.get()));
  }
  Tensor tensor;
  tensor.name = proto.name();
  tensor.dtype = dtype;
  tensor.shape = std::move(shape);
  tensor.byte_size = bytes;
  tensor.data = AliasData(buffer.memory, buffer.get());
  return tensor;
}

StatusOr<Tensor> ReadTensorProtoFile(const fs::path& path) {
  ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  onnx::TensorProto proto;
  if (!proto.ParseFromString(bytes)) return Status::InvalidArgument(path.string() + " is not a TensorProto");
  return TensorFromProto(proto, path.parent_path());
}

namespace {

// Consumes `model` (its initializers' raw data moves into the graph).
StatusOr<Graph> ImportConsumingModel(onnx::ModelProto& model, const fs::path& base_dir) {
  Graph graph;
  for (const auto& opset : model.opset_import()) {
    if (opset.domain().empty() || opset.domain() == "ai.onnx") graph.opset = static_cast<int>(opset.version());
  }
  if (graph.opset == 0 && model.opset_import_size() == 0) graph.opset = 1;  // IR v3 default
  if (graph.opset == 0) {
    return Status::Unimplemented("the model imports no opset of the default ONNX domain (only " +
                                 (model.opset_import_size() ? model.opset_import(0).domain() : std::string("none")) + ")");
  }
  if (graph.opset < kMinOpset || graph.opset > kMaxOpset) {
    return Status::Unimplemented("model uses ONNX opset " + std::to_string(graph.opset) + "; supported: " +
                                   std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset));
  }
  GraphImporter importer(&graph, base_dir, /*is_subgraph=*/false);
  RETURN_IF_ERROR(importer.Import(*model.mutable_graph()));
  return graph;
}

}  // namespace

StatusOr<Graph> ImportOnnxModel(const onnx::ModelProto& model, const fs::path& base_dir) {
  onnx::ModelProto copy = model;
  return ImportConsumingModel(copy, base_dir);
}

Status ReadOnnxModel(const fs::path& model_path, onnx::ModelProto* model) {
  ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(model_path));
  if (file.size() > static_cast<size_t>(INT_MAX)) {
    return Status::InvalidArgument(model_path.string() + " is over 2 GB: protobuf cannot parse it; keep the weights "
                                   "in external data files");
  }
  if (!model->ParseFromArray(file.data(), static_cast<int>(file.size()))) {
    return Status::InvalidArgument(model_path.string() + " is not an ONNX model (protobuf parse failed)");
  }
  return Status::Ok();
}

StatusOr<Graph> ImportOnnxFile(const fs::path& model_path) {
  onnx::ModelProto model;
  RETURN_IF_ERROR(ReadOnnxModel(model_path, &model));
  auto graph = ImportConsumingModel(model, model_path.parent_path());
  if (!graph.ok()) return graph.status().WithPrefix(model_path.string());
  return graph;
}

}  // namespace inferd::runtime

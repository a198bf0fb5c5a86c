// Runs the ONNX backend test suite (Debian's libonnx-testdata) through the runtime and prints pass /
// fail / unsupported per folder.
//
//   onnx_conformance [--data DIR] [--suite node ...] [--filter TEXT] [--verbose]
//                    [--expect FILE] [--write FILE]
//
// --expect: a list of test names that passed before; any of them not passing now fails the run (the
// CI guard). --write: records the tests passing now, for updating that list on purpose.
// Each test runs in a forked child, so a crash is one failed test, not a dead runner.
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>

#include "runtime/kernels/tensor_util.h"
#include "runtime/onnx/onnx_import.h"
#include "runtime/session.h"

namespace fs = std::filesystem;
using namespace inferd;
using namespace inferd::runtime;

namespace {

enum class Outcome : char { kPass = 'P', kFail = 'F', kUnsupported = 'U' };

struct Result {
  Outcome outcome = Outcome::kFail;
  std::string detail;
};

std::vector<fs::path> Numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> files;
  for (int i = 0;; ++i) {
    fs::path file = dir / (prefix + std::to_string(i) + ".pb");
    if (!fs::exists(file)) break;
    files.push_back(file);
  }
  return files;
}

double ElementAsDouble(const Tensor& t, int64_t i) {
  double value = 0;
  Status ignored = DispatchAny(t.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    value = static_cast<double>(ValuesOf<T>(t)[i]);
    return Status::Ok();
  });
  if (t.dtype == DataType::kFp16) value = HalfToFloat(ValuesOf<uint16_t>(t)[i]);
  if (t.dtype == DataType::kBf16) {
    const uint32_t bits = static_cast<uint32_t>(ValuesOf<uint16_t>(t)[i]) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    value = f;
  }
  return value;
}

// ONNX's backend tests compare with rtol 1e-3; atol 1e-5 as in the ORT reference run (shared/).
std::string Compare(const Tensor& expected, const Tensor& actual) {
  if (expected.dtype != actual.dtype) {
    return "type " + std::string(DataTypeName(actual.dtype)) + ", expected " + std::string(DataTypeName(expected.dtype));
  }
  if (expected.shape != actual.shape) return "shape " + ShapeToString(actual.shape) + ", expected " + ShapeToString(expected.shape);
  if (expected.dtype == DataType::kBytes) {
    return expected.bytes().size() == actual.bytes().size() &&
                   std::equal(expected.bytes().begin(), expected.bytes().end(), actual.bytes().begin())
               ? ""
               : "strings differ";
  }
  const bool approximate = expected.dtype == DataType::kFp32 || expected.dtype == DataType::kFp64 ||
                           expected.dtype == DataType::kFp16 || expected.dtype == DataType::kBf16;
  for (int64_t i = 0; i < ElementsOf(expected); ++i) {
    const double e = ElementAsDouble(expected, i), a = ElementAsDouble(actual, i);
    if (std::isnan(e) && std::isnan(a)) continue;
    if (e == a) continue;
    if (approximate && std::abs(e - a) <= 1e-5 + 1e-3 * std::abs(e)) continue;
    return "element " + std::to_string(i) + " is " + std::to_string(a) + ", expected " + std::to_string(e);
  }
  return "";
}

// What the data file of each graph input (in the session's order: initializers are not inputs)
// and output holds: a TensorProto, a SequenceProto or an OptionalProto.
enum class DataKind { kTensor, kSequence, kOptional };
struct DataKinds {
  std::vector<DataKind> inputs, outputs;
};

DataKind KindOf(const onnx::TypeProto& type) {
  if (type.has_sequence_type()) return DataKind::kSequence;
  if (type.has_optional_type()) return DataKind::kOptional;
  return DataKind::kTensor;
}

DataKinds FindDataKinds(const fs::path& model_path) {
  DataKinds slots;
  std::ifstream in(model_path, std::ios::binary);
  onnx::ModelProto model;
  if (!model.ParseFromIstream(&in)) return slots;
  std::set<std::string> initializers;
  for (const auto& initializer : model.graph().initializer()) initializers.insert(initializer.name());
  for (const auto& input : model.graph().input())
    if (!initializers.count(input.name())) slots.inputs.push_back(KindOf(input.type()));
  for (const auto& output : model.graph().output()) slots.outputs.push_back(KindOf(output.type()));
  return slots;
}

StatusOr<Tensor> SequenceFromProto(const onnx::SequenceProto& proto, const fs::path& dir) {
  if (proto.elem_type() != onnx::SequenceProto::TENSOR)
    return Status::Unimplemented("a sequence of non-tensors (maps, sequences, optionals)");
  auto items = std::make_shared<std::vector<Tensor>>();
  for (const auto& tensor_proto : proto.tensor_values()) {
    ASSIGN_OR_RETURN(Tensor item, TensorFromProto(tensor_proto, dir));
    items->push_back(std::move(item));
  }
  Tensor sequence;
  sequence.sequence = std::move(items);
  return sequence;
}

// An empty OptionalProto is an empty optional; one holding a tensor or sequence is that value.
StatusOr<Tensor> OptionalFromProto(const onnx::OptionalProto& proto, const fs::path& dir) {
  if (proto.has_tensor_value()) return TensorFromProto(proto.tensor_value(), dir);
  if (proto.has_sequence_value()) return SequenceFromProto(proto.sequence_value(), dir);
  if (proto.elem_type() != onnx::OptionalProto::TENSOR && proto.elem_type() != onnx::OptionalProto::SEQUENCE &&
      proto.elem_type() != onnx::OptionalProto::UNDEFINED)
    return Status::Unimplemented("an optional of a map or optional");
  Tensor empty;
  empty.empty_optional = true;
  return empty;
}

StatusOr<Tensor> ReadDataFile(const fs::path& file, const std::vector<DataKind>& kinds, size_t index) {
  const DataKind kind = index < kinds.size() ? kinds[index] : DataKind::kTensor;
  if (kind == DataKind::kTensor) return ReadTensorProtoFile(file);
  std::ifstream in(file, std::ios::binary);
  if (kind == DataKind::kSequence) {
    onnx::SequenceProto proto;
    if (!proto.ParseFromIstream(&in)) return Status::InvalidArgument(file.string() + " is not a SequenceProto");
    return SequenceFromProto(proto, file.parent_path());
  }
  onnx::OptionalProto proto;
  if (!proto.ParseFromIstream(&in)) return Status::InvalidArgument(file.string() + " is not an OptionalProto");
  return OptionalFromProto(proto, file.parent_path());
}

// Sequences compare item by item; an empty optional only equals an empty optional.
std::string CompareValues(const Tensor& expected, const Tensor& actual) {
  if (expected.empty_optional || actual.empty_optional) {
    return expected.empty_optional == actual.empty_optional ? "" : "empty and non-empty optionals";
  }
  if (expected.sequence == nullptr) {
    if (actual.sequence != nullptr) return "a sequence, expected a tensor";
    return Compare(expected, actual);
  }
  if (actual.sequence == nullptr) return "a tensor, expected a sequence";
  if (expected.sequence->size() != actual.sequence->size())
    return "a sequence of " + std::to_string(actual.sequence->size()) + ", expected " + std::to_string(expected.sequence->size());
  for (size_t i = 0; i < expected.sequence->size(); ++i) {
    std::string difference = Compare((*expected.sequence)[i], (*actual.sequence)[i]);
    if (!difference.empty()) return "item " + std::to_string(i) + ": " + difference;
  }
  return "";
}

Result RunTest(const fs::path& dir) {
  auto session = Session::Load(dir / "model.onnx");
  if (!session.ok()) {
    const bool unsupported = session.status().code() == StatusCode::kUnimplemented;
    return {unsupported ? Outcome::kUnsupported : Outcome::kFail, session.status().message()};
  }
  std::vector<fs::path> data_sets;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_directory() && entry.path().filename().string().rfind("test_data_set_", 0) == 0) data_sets.push_back(entry.path());
  }
  std::sort(data_sets.begin(), data_sets.end());
  if (data_sets.empty()) return {Outcome::kUnsupported, "no test data"};
  const DataKinds kinds = FindDataKinds(dir / "model.onnx");
  for (const fs::path& data : data_sets) {
    std::vector<Tensor> inputs, expected, actual;
    for (const fs::path& file : Numbered(data, "input_")) {
      auto tensor = ReadDataFile(file, kinds.inputs, inputs.size());
      if (!tensor.ok()) return {Outcome::kUnsupported, "input " + file.filename().string() + ": " + tensor.status().message()};
      inputs.push_back(std::move(tensor).value());
    }
    for (const fs::path& file : Numbered(data, "output_")) {
      auto tensor = ReadDataFile(file, kinds.outputs, expected.size());
      if (!tensor.ok()) return {Outcome::kUnsupported, "output " + file.filename().string() + ": " + tensor.status().message()};
      expected.push_back(std::move(tensor).value());
    }
    // The suite's bfloat16 data files say UINT16 (ONNX wrote bf16 bits that way before it had the
    // type in numpy): same bits, so take them as the type the model declares.
    for (size_t i = 0; i < inputs.size() && i < (*session)->input_count(); ++i) {
      if (inputs[i].dtype == DataType::kUint16 && (*session)->input(i).dtype == DataType::kBf16) inputs[i].dtype = DataType::kBf16;
    }
    Status status = (*session)->Run(inputs, &actual);
    if (!status.ok()) {
      return {status.code() == StatusCode::kUnimplemented ? Outcome::kUnsupported : Outcome::kFail, status.message()};
    }
    if (actual.size() < expected.size()) return {Outcome::kFail, "too few outputs"};
    for (size_t i = 0; i < expected.size(); ++i) {
      if (expected[i].dtype == DataType::kUint16 && actual[i].dtype == DataType::kBf16) expected[i].dtype = DataType::kBf16;
      std::string difference = CompareValues(expected[i], actual[i]);
      if (!difference.empty()) return {Outcome::kFail, "output " + std::to_string(i) + ": " + difference};
    }
  }
  return {Outcome::kPass, ""};
}

// Runs one test in a child process; a crash or a hang (60 s) is a failure with a reason.
Result RunIsolated(const fs::path& dir) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return {Outcome::kFail, "pipe failed"};
  pid_t child = fork();
  if (child == 0) {
    close(pipe_fds[0]);
    alarm(60);
    Result result = RunTest(dir);
    std::string message(1, static_cast<char>(result.outcome));
    message += result.detail.substr(0, 2000);
    ssize_t ignored = write(pipe_fds[1], message.data(), message.size());
    (void)ignored;
    _exit(0);
  }
  close(pipe_fds[1]);
  std::string message;
  char buffer[4096];
  ssize_t n;
  while ((n = read(pipe_fds[0], buffer, sizeof(buffer))) > 0) message.append(buffer, static_cast<size_t>(n));
  close(pipe_fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  if (message.empty()) {
    return {Outcome::kFail, WIFSIGNALED(status) ? "crashed with signal " + std::to_string(WTERMSIG(status)) : "no result"};
  }
  return {static_cast<Outcome>(message[0]), message.substr(1)};
}

std::set<std::string> ReadList(const fs::path& file) {
  std::set<std::string> names;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != '#') names.insert(line);
  }
  return names;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ONNX backend test suite runner for the inferd runtime"};
  std::string data_dir = "/usr/share/libonnx-testdata/data";
  std::vector<std::string> suites{"node", "pytorch-converted", "pytorch-operator", "simple"};
  std::string filter, expect_file, write_file;
  bool verbose = false;
  app.add_option("--data", data_dir, "Folder holding the suites")->capture_default_str();
  app.add_option("--suite", suites, "Suites to run")->capture_default_str();
  app.add_option("--filter", filter, "Only tests whose name contains this");
  app.add_option("--expect", expect_file, "Tests that must pass (one suite/name per line)");
  app.add_option("--write", write_file, "Write the tests passing now to this file");
  app.add_flag("--verbose", verbose, "Print every failing or unsupported test with its reason");
  CLI11_PARSE(app, argc, argv);

  std::set<std::string> passing;
  std::map<std::string, std::string> not_passing;  // name -> reason
  std::cout << "| suite | pass | fail | unsupported | total |\n|---|---:|---:|---:|---:|\n";
  for (const std::string& suite : suites) {
    std::vector<fs::path> tests;
    if (!fs::exists(fs::path(data_dir) / suite)) {
      std::cerr << "missing suite " << suite << " under " << data_dir << "\n";
      return 2;
    }
    for (const auto& entry : fs::directory_iterator(fs::path(data_dir) / suite)) {
      if (entry.is_directory() && fs::exists(entry.path() / "model.onnx") &&
          entry.path().filename().string().find(filter) != std::string::npos) {
        tests.push_back(entry.path());
      }
    }
    std::sort(tests.begin(), tests.end());
    int counts[3] = {0, 0, 0};
    for (const fs::path& test : tests) {
      const std::string name = suite + "/" + test.filename().string();
      Result result = RunIsolated(test);
      counts[result.outcome == Outcome::kPass ? 0 : result.outcome == Outcome::kFail ? 1 : 2]++;
      if (result.outcome == Outcome::kPass) {
        passing.insert(name);
      } else {
        not_passing[name] = std::string(result.outcome == Outcome::kFail ? "FAIL " : "UNSUPPORTED ") + result.detail;
        if (verbose) std::cerr << name << ": " << not_passing[name] << "\n";
      }
    }
    std::cout << "| " << suite << " | " << counts[0] << " | " << counts[1] << " | " << counts[2] << " | " << tests.size()
              << " |\n";
  }
  if (!write_file.empty()) {
    std::ofstream out(write_file);
    out << "# Tests the runtime passes (tests/conformance/onnx_conformance --write). CI fails if one stops passing.\n";
    for (const auto& name : passing) out << name << "\n";
  }
  int regressions = 0;
  if (!expect_file.empty()) {
    for (const auto& name : ReadList(expect_file)) {
      if (passing.count(name)) continue;
      if (!filter.empty() && name.find(filter) == std::string::npos) continue;
      if (std::find_if(suites.begin(), suites.end(), [&](const std::string& s) { return name.rfind(s + "/", 0) == 0; }) ==
          suites.end()) {
        continue;
      }
      ++regressions;
      std::cerr << "REGRESSION " << name << ": " << (not_passing.count(name) ? not_passing[name] : "not found") << "\n";
    }
    std::cout << "\n" << regressions << " regression(s) against " << expect_file << "\n";
  }
  return regressions == 0 ? 0 : 1;
}

// Tensor elements <-> JSON values, shared by the JSON codecs (KServe v2 in kserve_codec, TF
// Serving in tfserving_codec), and base64 for TF Serving's {"b64": ...} strings.
#pragma once

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdint>
#include <cstring>
#include <algorithm>
#include <optional>
#include <string>
#include <string_view>

#include "common/bytes_elements.h"
#include "common/tensor.h"

namespace inferd {

// NaN and infinities are written as NaN / Infinity / -Infinity (what Triton writes, and what
// Python's json reads); RapidJSON's default writer drops them and leaves a broken document.
using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer, rapidjson::UTF8<>, rapidjson::UTF8<>,
                                     rapidjson::CrtAllocator, rapidjson::kWriteNanAndInfFlag>;

// Writes one JSON scalar as an element of `dtype` at `out`; false if it is not a valid value of
// that type (a float for an integer type, an integer out of range, a non-bool for BOOL...).
// Fixed-size types only.
bool StoreJsonScalar(const rapidjson::Value& value, DataType dtype, uint8_t* out);

// Writes elements [begin, end) of a fixed-size-type tensor as JSON scalars (no array around them).
void WriteJsonElements(const Tensor& tensor, size_t begin, size_t end, JsonWriter& w);

std::string Base64Encode(std::string_view bytes);
// nullopt when `text` is not valid base64 (standard alphabet, '=' padding optional).
std::optional<std::string> Base64Decode(std::string_view text);

}  // namespace inferd

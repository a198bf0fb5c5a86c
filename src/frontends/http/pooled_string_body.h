// A Beast body (request or response) read into a pooled string (common/string_pool.h) sized from
// Content-Length. Why not Beast's string_body: it grows the string with resize, zero-filling it,
// before copying each read into it; appending copies once, into pages the pool already has.
#pragma once

#include <boost/beast/core/buffers_range.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/optional.hpp>
#include <cstdint>
#include <string>

#include "common/string_pool.h"

namespace inferd {

struct PooledStringBody {
  using value_type = std::string;

  static uint64_t size(const value_type& body) { return body.size(); }

  class reader {
   public:
    template <bool isRequest, class Fields>
    reader(boost::beast::http::header<isRequest, Fields>&, value_type& body) : body_(body) {}

    void init(const boost::optional<uint64_t>& length, boost::beast::error_code& ec) {
      ec = {};
      if (!length) return;
      if (*length > body_.max_size()) {
        ec = boost::beast::http::error::buffer_overflow;
        return;
      }
      body_ = BodyStringPool().Take(static_cast<size_t>(*length));
    }

    template <class ConstBufferSequence>
    size_t put(const ConstBufferSequence& buffers, boost::beast::error_code& ec) {
      ec = {};
      size_t appended = 0;
      for (const auto buffer : boost::beast::buffers_range_ref(buffers)) {
        body_.append(static_cast<const char*>(buffer.data()), buffer.size());
        appended += buffer.size();
      }
      return appended;
    }

    void finish(boost::beast::error_code& ec) { ec = {}; }

   private:
    value_type& body_;
  };
};

}  // namespace inferd

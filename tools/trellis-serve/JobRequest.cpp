//===- JobRequest.cpp - A generation request from its JSON body -----------===//
#include "tools/trellis-serve/JobRequest.h"

#include "trellis/Format/Npy.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <set>

namespace trellis::serve {

using nlohmann::json;

namespace {

/// The sampler steps trellis.exe accepts (--steps-ss / --steps-slat).
constexpr int64_t kMaxSteps = 10000;
constexpr double kMaxCfg = 1000.0;

RequestError bad(std::string field, std::string message, int status = 400) {
  return RequestError{status, std::move(field), std::move(message)};
}

/// "a string", "an integer", ... for "expected X, found Y" messages.
std::string kindOf(const json &v) {
  switch (v.type()) {
  case json::value_t::null:
    return "null";
  case json::value_t::boolean:
    return "a boolean";
  case json::value_t::number_integer:
  case json::value_t::number_unsigned:
    return "an integer";
  case json::value_t::number_float:
    return "a number";
  case json::value_t::string:
    return "a string";
  case json::value_t::array:
    return "a list";
  case json::value_t::object:
    return "an object";
  default:
    return "a value of another kind";
  }
}

/// {"steps": n, "cfg": w} of stage `name` into `out`.
std::optional<RequestError> parseSampler(const json &v, const std::string &name,
                                         SamplerRunOverrides &out) {
  if (!v.is_object())
    return bad(name, "expected an object {\"steps\": N, \"cfg\": W}, found " +
                         kindOf(v));
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string field = name + "." + it.key();
    if (it.key() == "steps") {
      if (!it->is_number_integer() || it->get<int64_t>() < 1 ||
          it->get<int64_t>() > kMaxSteps)
        return bad(field, "expected an integer in 1.." +
                              std::to_string(kMaxSteps) + ", found " +
                              (it->is_number() ? it->dump() : kindOf(*it)));
      out.steps = it->get<int64_t>();
    } else if (it.key() == "cfg") {
      if (!it->is_number() || !std::isfinite(it->get<double>()) ||
          it->get<double>() < 0 || it->get<double>() > kMaxCfg)
        return bad(field, "expected a number in 0..1000, found " +
                              (it->is_number() ? it->dump() : kindOf(*it)));
      out.cfgStrength = it->get<double>();
    } else {
      return bad(field, "unknown field (expected \"steps\" or \"cfg\")");
    }
  }
  return std::nullopt;
}

/// The conditioning tokens: base64 of a .npy whose shape is the program's.
std::optional<RequestError> parseCond(const json &v, const Program &program,
                                      GenerationRequest &req) {
  if (!v.is_string())
    return bad("cond",
               "expected a string (base64 of a .npy file), found " + kindOf(v));
  auto bytes = decodeBase64(v.get<std::string>());
  if (!bytes)
    return bad("cond", "is not valid base64 (RFC 4648 with padding)");
  auto t = parseNpy(bytes->data(), bytes->size(), "cond");
  if (!t)
    return bad("cond", t.message(), 422);
  const Function *slat = program.find("slat_stage");
  if (!slat || slat->argTypes.size() < 2)
    return bad("cond", "the program has no slat_stage to take it", 422);
  HostTensor cond = t->dtype() == DType::F16 ? t->toFloat32() : *t;
  if (Status s = expectInputType(cond, slat->argTypes[1], "cond"); !s)
    return bad("cond", s.message(), 422);
  const float *data = cond.data<float>();
  for (int64_t i = 0; i < cond.numel(); ++i)
    if (!std::isfinite(data[i]))
      return bad("cond",
                 "element " + std::to_string(i) + " is not finite (" +
                     std::to_string(data[i]) + ")",
                 422);
  req.cond = {cond, "cond"};
  return std::nullopt;
}

} // namespace

std::optional<std::string> decodeBase64(std::string_view text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z')
      return c - 'A';
    if (c >= 'a' && c <= 'z')
      return c - 'a' + 26;
    if (c >= '0' && c <= '9')
      return c - '0' + 52;
    if (c == '+')
      return 62;
    if (c == '/')
      return 63;
    return -1;
  };
  if (text.size() % 4)
    return std::nullopt;
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      char c = text[i + k];
      // Padding only at the end: "xx==" or "xxx=".
      if (c == '=' && i + 4 == text.size() && k >= 2) {
        v[k] = 0;
        ++pad;
        continue;
      }
      if (pad || (v[k] = value(c)) < 0)
        return std::nullopt;
    }
    uint32_t n = uint32_t(v[0]) << 18 | uint32_t(v[1]) << 12 |
                 uint32_t(v[2]) << 6 | uint32_t(v[3]);
    out.push_back(char(n >> 16));
    if (pad < 2)
      out.push_back(char(n >> 8 & 0xff));
    if (pad < 1)
      out.push_back(char(n & 0xff));
  }
  return out;
}

std::variant<JobSpec, RequestError> parseJobRequest(std::string_view body,
                                                    const Program &program) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return bad("", "the body is not valid JSON");
  if (!j.is_object())
    return bad("", "expected a JSON object, found " + kindOf(j));
  JobSpec spec;
  GenerationRequest &req = spec.request;
  if (!j.contains("cond"))
    return bad("cond", "is required (base64 of the conditioning tokens' .npy)");
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string &key = it.key();
    std::optional<RequestError> e;
    if (key == "cond") {
      e = parseCond(*it, program, req);
    } else if (key == "seed") {
      if (!it->is_number_integer() ||
          (it->is_number_integer() && !it->is_number_unsigned() &&
           it->get<int64_t>() < 0))
        e = bad("seed", "expected an integer in 0..2^64-1, found " +
                            (it->is_number() ? it->dump() : kindOf(*it)));
      else
        req.seed = it->get<uint64_t>();
    } else if (key == "formats") {
      if (!it->is_array() || it->empty())
        e = bad(
            "formats",
            "expected a non-empty list of \"gs\", \"rf\", \"mesh\", found " +
                (it->is_array() ? std::string("[]") : kindOf(*it)));
      req.gs = req.rf = req.mesh = false;
      std::set<std::string> seen;
      for (size_t i = 0; !e && i < it->size(); ++i) {
        const json &f = (*it)[i];
        std::string name = f.is_string() ? f.get<std::string>() : "";
        if (name != "gs" && name != "rf" && name != "mesh")
          e = bad("formats[" + std::to_string(i) + "]",
                  "expected \"gs\", \"rf\" or \"mesh\", found " +
                      (f.is_string() ? "\"" + name + "\"" : kindOf(f)));
        else if (!seen.insert(name).second)
          e = bad("formats[" + std::to_string(i) + "]",
                  "\"" + name + "\" is given twice");
        else
          spec.formats.push_back(name);
        req.gs |= name == "gs";
        req.rf |= name == "rf";
        req.mesh |= name == "mesh";
      }
    } else if (key == "ss") {
      e = parseSampler(*it, "ss", req.ss);
    } else if (key == "slat") {
      e = parseSampler(*it, "slat", req.slat);
    } else {
      e = bad(key, "unknown field (expected cond, seed, formats, ss, slat)");
    }
    if (e)
      return *e;
  }
  if (spec.formats.empty())
    spec.formats = {"gs", "rf", "mesh"};
  // The GPU keeps the mesh fields on the device for FlexiCubes; the server
  // has no use for them on the host.
  req.keepMeshFields = false;
  return spec;
}

} // namespace trellis::serve

#include "tools/make_model/sentencepiece_model_proto.h"

#include <bit>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"

namespace ernie::make_model {
namespace {

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// Reads protobuf fields from a byte range; every failure names the offset.
class WireReader {
 public:
  explicit WireReader(std::string_view bytes) : bytes_(bytes) {}
  bool done() const { return pos_ >= bytes_.size(); }
  size_t pos() const { return pos_; }

  absl::StatusOr<uint64_t> Varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= bytes_.size()) return Error("truncated varint");
      const uint8_t byte = static_cast<uint8_t>(bytes_[pos_++]);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    return Error("varint longer than 10 bytes");
  }

  absl::StatusOr<std::string_view> Bytes(size_t count) {
    if (count > bytes_.size() - pos_) return Error("field runs past the end");
    std::string_view out = bytes_.substr(pos_, count);
    pos_ += count;
    return out;
  }

  // Skips the value of a field of `wire_type` (the tag already read).
  absl::Status Skip(uint32_t wire_type) {
    switch (wire_type) {
      case kVarint: return Varint().status();
      case kFixed64: return Bytes(8).status();
      case kFixed32: return Bytes(4).status();
      case kLengthDelimited: {
        ERNIE_ASSIGN_OR_RETURN(const uint64_t length, Varint());
        return Bytes(static_cast<size_t>(length)).status();
      }
      default: return Error(absl::StrCat("unsupported wire type ", wire_type));
    }
  }

  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("sentencepiece model: ", what, " at byte ", pos_));
  }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
};

void AppendVarint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void AppendTag(std::string& out, uint32_t field, uint32_t wire_type) {
  AppendVarint(out, (static_cast<uint64_t>(field) << 3) | wire_type);
}

absl::StatusOr<PieceEntry> ParsePiece(std::string_view bytes) {
  PieceEntry entry;
  WireReader reader(bytes);
  while (!reader.done()) {
    ERNIE_ASSIGN_OR_RETURN(const uint64_t tag, reader.Varint());
    const uint32_t field = static_cast<uint32_t>(tag >> 3);
    const uint32_t wire_type = static_cast<uint32_t>(tag & 7);
    if (field == 1 && wire_type == kLengthDelimited) {
      ERNIE_ASSIGN_OR_RETURN(const uint64_t length, reader.Varint());
      ERNIE_ASSIGN_OR_RETURN(std::string_view text, reader.Bytes(static_cast<size_t>(length)));
      entry.piece = std::string(text);
    } else if (field == 2 && wire_type == kFixed32) {
      ERNIE_ASSIGN_OR_RETURN(std::string_view raw, reader.Bytes(4));
      uint32_t bits = 0;
      for (int i = 0; i < 4; ++i) bits |= static_cast<uint32_t>(static_cast<uint8_t>(raw[i])) << (8 * i);
      entry.score = std::bit_cast<float>(bits);
    } else if (field == 3 && wire_type == kVarint) {
      ERNIE_ASSIGN_OR_RETURN(const uint64_t type, reader.Varint());
      if (type < 1 || type > 6) return reader.Error(absl::StrCat("unknown piece type ", type));
      entry.type = static_cast<PieceType>(type);
    } else {
      return reader.Error(absl::StrCat("unexpected piece field ", field));
    }
  }
  return entry;
}

void AppendPiece(std::string& out, const PieceEntry& entry) {
  std::string body;
  AppendTag(body, 1, kLengthDelimited);
  AppendVarint(body, entry.piece.size());
  body += entry.piece;
  AppendTag(body, 2, kFixed32);
  const uint32_t bits = std::bit_cast<uint32_t>(entry.score);
  for (int i = 0; i < 4; ++i) body.push_back(static_cast<char>(bits >> (8 * i)));
  if (entry.type != PieceType::kNormal) {  // NORMAL is the default, left implicit as protobuf does
    AppendTag(body, 3, kVarint);
    AppendVarint(body, static_cast<uint64_t>(entry.type));
  }
  AppendTag(out, 1, kLengthDelimited);
  AppendVarint(out, body.size());
  out += body;
}

}  // namespace

absl::StatusOr<EditableModelProto> ParseModelProto(std::string_view serialized) {
  EditableModelProto proto;
  WireReader reader(serialized);
  while (!reader.done()) {
    const size_t field_start = reader.pos();
    ERNIE_ASSIGN_OR_RETURN(const uint64_t tag, reader.Varint());
    const uint32_t field = static_cast<uint32_t>(tag >> 3);
    const uint32_t wire_type = static_cast<uint32_t>(tag & 7);
    if (field == 1) {
      if (wire_type != kLengthDelimited) return reader.Error("pieces field is not length-delimited");
      ERNIE_ASSIGN_OR_RETURN(const uint64_t length, reader.Varint());
      ERNIE_ASSIGN_OR_RETURN(std::string_view body, reader.Bytes(static_cast<size_t>(length)));
      ERNIE_ASSIGN_OR_RETURN(PieceEntry entry, ParsePiece(body));
      proto.pieces.push_back(std::move(entry));
    } else {
      ERNIE_RETURN_IF_ERROR(reader.Skip(wire_type));
      proto.other_fields.append(serialized.substr(field_start, reader.pos() - field_start));
    }
  }
  if (proto.pieces.empty()) return absl::InvalidArgumentError("sentencepiece model: no pieces");
  return proto;
}

std::string SerializeModelProto(const EditableModelProto& proto) {
  std::string out;
  for (const PieceEntry& entry : proto.pieces) AppendPiece(out, entry);
  out += proto.other_fields;
  return out;
}

}  // namespace ernie::make_model

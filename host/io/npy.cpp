#include "io/npy.h"

#include <cstring>
#include <sstream>

#include "common/error.h"
#include "io/read_whole_file.h"

namespace lenet5 {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr int64_t kMaxFloats = int64_t(1) << 32;  // 16 GiB of floats: more is a malformed header

// The value of 'key': in the header dictionary, as its raw text up to the next ',' or '}' at
// depth 0 (a tuple's commas are inside parentheses).
std::string dict_value(const std::string& header, const std::string& key, const std::string& name) {
    const std::string quoted[] = {"'" + key + "'", "\"" + key + "\""};
    size_t at = std::string::npos;
    for (const auto& q : quoted)
        if ((at = header.find(q)) != std::string::npos) {
            at += q.size();
            break;
        }
    if (at == std::string::npos) throw Error(name + ": .npy header has no '" + key + "'");
    at = header.find(':', at);
    if (at == std::string::npos) throw Error(name + ": .npy header: no value for '" + key + "'");
    int depth = 0;
    size_t end = at + 1;
    for (; end < header.size(); ++end) {
        const char c = header[end];
        if (c == '(') ++depth;
        else if (c == ')') --depth;
        else if ((c == ',' || c == '}') && depth == 0) break;
    }
    std::string v = header.substr(at + 1, end - at - 1);
    const size_t b = v.find_first_not_of(" \t"), e = v.find_last_not_of(" \t");
    return b == std::string::npos ? "" : v.substr(b, e - b + 1);
}

std::vector<int64_t> parse_shape(const std::string& text, const std::string& name) {
    if (text.size() < 2 || text.front() != '(' || text.back() != ')')
        throw Error(name + ": .npy shape '" + text + "' is not a tuple");
    std::vector<int64_t> shape;
    std::istringstream in(text.substr(1, text.size() - 2));
    std::string item;
    int64_t total = 1;
    while (std::getline(in, item, ',')) {
        const size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
        if (b == std::string::npos) {
            if (in.eof()) break;  // the trailing comma of (3,)
            throw Error(name + ": .npy shape '" + text + "' has an empty item");
        }
        item = item.substr(b, e - b + 1);
        if (item.size() > 12 || item.find_first_not_of("0123456789") != std::string::npos)
            throw Error(name + ": .npy shape '" + text + "' has a bad dimension '" + item + "'");
        const int64_t d = std::stoll(item);
        if (d > 0 && total > kMaxFloats / d) throw Error(name + ": .npy shape '" + text + "' is absurdly large");
        total *= d;
        shape.push_back(d);
    }
    return shape;
}

}  // namespace

NpyArray parse_npy(const std::string& bytes, const std::string& name) {
    if (bytes.size() < 10 || bytes.compare(0, 6, kMagic, 6) != 0) throw Error(name + ": not a NumPy .npy file");
    const int major = static_cast<unsigned char>(bytes[6]);
    if (major < 1 || major > 3) throw Error(name + ": .npy format version " + std::to_string(major) + " is not supported");
    size_t header_len = 0, start = 0;
    if (major == 1) {
        header_len = static_cast<unsigned char>(bytes[8]) | size_t(static_cast<unsigned char>(bytes[9])) << 8;
        start = 10;
    } else {
        if (bytes.size() < 12) throw Error(name + ": truncated .npy header");
        for (int i = 3; i >= 0; --i) header_len = header_len << 8 | static_cast<unsigned char>(bytes[8 + i]);
        start = 12;
    }
    if (header_len > bytes.size() - start) throw Error(name + ": truncated .npy header");
    const std::string header = bytes.substr(start, header_len);
    const std::string descr = dict_value(header, "descr", name);
    if (descr != "'<f4'" && descr != "\"<f4\"")
        throw Error(name + ": .npy dtype " + descr + " is not float32 ('<f4'); convert with .astype('<f4')");
    if (dict_value(header, "fortran_order", name) != "False")
        throw Error(name + ": .npy array is in Fortran order; save it in C order");
    NpyArray a;
    a.shape = parse_shape(dict_value(header, "shape", name), name);
    int64_t count = 1;
    for (const int64_t d : a.shape) count *= d;
    const size_t data_at = start + header_len;
    if (bytes.size() - data_at != static_cast<size_t>(count) * sizeof(float))
        throw Error(name + ": .npy data has " + std::to_string(bytes.size() - data_at) + " bytes, its shape needs " +
                    std::to_string(count * 4));
    a.data.resize(static_cast<size_t>(count));
    if (count) std::memcpy(a.data.data(), bytes.data() + data_at, a.data.size() * sizeof(float));
    return a;
}

NpyArray read_npy(const std::string& path) { return parse_npy(read_whole_file(path), path); }

std::string npy_bytes(const NpyArray& a) {
    std::string shape = "(";
    for (const int64_t d : a.shape) shape += std::to_string(d) + ", ";
    if (a.shape.size() > 1) shape.resize(shape.size() - 2);
    else if (a.shape.size() == 1) shape.resize(shape.size() - 1);
    shape += ")";
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
    // Magic (6) + version (2) + length (2) + header + '\n', padded to a multiple of 64.
    const size_t unpadded = 10 + header.size() + 1;
    header.append((64 - unpadded % 64) % 64, ' ');
    header += '\n';
    std::string out(kMagic, 6);
    out += '\x01';
    out += '\x00';
    out += static_cast<char>(header.size() & 0xff);
    out += static_cast<char>(header.size() >> 8);
    out += header;
    out.append(reinterpret_cast<const char*>(a.data.data()), a.data.size() * sizeof(float));
    return out;
}

}  // namespace lenet5

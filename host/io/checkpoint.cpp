#include "io/checkpoint.h"

#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "io/atomic_file.h"
#include "common/error.h"
#include "model/model_file.h"

namespace lenet5 {

namespace {

constexpr char kMagic[8] = {'L', 'E', 'N', 'E', 'T', '5', 'C', 'K'};
// A description longer than this is not from a real network: refuse before allocating.
constexpr uint32_t kMaxDescription = 1u << 20;

class Writer {
public:
    template <typename T>
    void put(T v) {
        unsigned char b[sizeof(T)];
        std::memcpy(b, &v, sizeof(T));  // hosts we build for are little-endian (checked below)
        out_.append(reinterpret_cast<const char*>(b), sizeof(T));
    }
    void bytes(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
    std::string& str() { return out_; }

private:
    std::string out_;
};

class Reader {
public:
    Reader(const std::string& in, size_t end, std::string source) : in_(in), end_(end), source_(std::move(source)) {}
    template <typename T>
    T get(const char* section) {
        T v;
        need(sizeof(T), section);
        std::memcpy(&v, in_.data() + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }
    void bytes(void* p, size_t n, const char* section) {
        need(n, section);
        if (n > 0) std::memcpy(p, in_.data() + pos_, n);  // p is null for an empty vector's data()
        pos_ += n;
    }
    size_t remaining() const { return end_ - pos_; }

private:
    void need(size_t n, const char* section) {
        if (end_ - pos_ < n) throw Error(source_ + ": truncated checkpoint (the " + section + " section is incomplete)");
    }
    const std::string& in_;
    size_t end_, pos_ = 0;
    std::string source_;
};

static_assert(sizeof(float) == 4, "checkpoints store 32-bit floats");

uint32_t crc_of(const std::string& s, size_t n) {
    return static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(s.data()), static_cast<uInt>(n)));
}

}  // namespace

std::string encode_checkpoint(const Checkpoint& c) {
    Writer w;
    w.bytes(kMagic, sizeof kMagic);
    const bool adam = c.optimizer != Optimizer::Sgd;
    w.put<uint32_t>(adam ? kAdamCheckpointVersion : kCheckpointVersion);
    w.put<uint64_t>(c.network_hash);
    w.put<uint32_t>(static_cast<uint32_t>(c.network_description.size()));
    w.bytes(c.network_description.data(), c.network_description.size());
    w.put<uint32_t>(static_cast<uint32_t>(c.model_text.size()));
    w.bytes(c.model_text.data(), c.model_text.size());
    w.put<uint32_t>(c.epoch);
    w.put<uint32_t>(c.step);
    w.put<uint64_t>(c.seed);
    w.put<uint64_t>(c.rng_state);
    w.put<uint32_t>(c.batch);
    w.put<float>(c.lr);
    w.put<float>(c.momentum);
    w.put<uint64_t>(c.params.size());
    w.bytes(c.params.data(), c.params.size() * sizeof(float));
    w.bytes(c.velocity.data(), c.velocity.size() * sizeof(float));
    if (adam) {
        w.put<uint32_t>(static_cast<uint32_t>(c.optimizer));
        w.put<uint64_t>(c.adam_steps);
        w.bytes(c.second.data(), c.second.size() * sizeof(float));
    }
    w.put<uint32_t>(crc_of(w.str(), w.str().size()));
    return w.str();
}

Checkpoint decode_checkpoint(const std::string& in, const std::string& source) {
    if (in.empty()) throw Error(source + ": empty file, not a checkpoint");
    if (in.size() < sizeof kMagic || std::memcmp(in.data(), kMagic, sizeof kMagic) != 0)
        throw Error(source + ": not a lenet5 checkpoint (bad magic)");
    Reader r(in, in.size(), source);
    char magic[sizeof kMagic];
    r.bytes(magic, sizeof magic, "header");
    const uint32_t version = r.get<uint32_t>("header");
    if (version < 1 || version > kAdamCheckpointVersion)
        throw Error(source + ": checkpoint format version " + std::to_string(version) + " (this lenet5 reads versions 1 to " +
                    std::to_string(kAdamCheckpointVersion) + ")");
    Checkpoint c;
    c.network_hash = r.get<uint64_t>("network");
    auto text = [&](std::string& out, const char* what) {
        const uint32_t len = r.get<uint32_t>("network");
        if (len > kMaxDescription)
            throw Error(source + ": corrupt checkpoint (" + what + " of " + std::to_string(len) + " bytes)");
        if (len > r.remaining()) throw Error(source + ": truncated checkpoint (the network section is incomplete)");
        out.resize(len);
        r.bytes(&out[0], len, "network");
    };
    text(c.network_description, "network description");
    if (version >= 2) text(c.model_text, "model file");
    c.epoch = r.get<uint32_t>("training");
    c.step = r.get<uint32_t>("training");
    c.seed = r.get<uint64_t>("training");
    c.rng_state = r.get<uint64_t>("training");
    c.batch = r.get<uint32_t>("training");
    c.lr = r.get<float>("training");
    c.momentum = r.get<float>("training");
    const uint64_t n = r.get<uint64_t>("tensors");
    if (n > r.remaining() / (2 * sizeof(float)))
        throw Error(source + ": truncated checkpoint (the tensors section is incomplete)");
    c.params.resize(n);
    c.velocity.resize(n);
    r.bytes(c.params.data(), n * sizeof(float), "tensors");
    r.bytes(c.velocity.data(), n * sizeof(float), "tensors");
    if (version == kAdamCheckpointVersion) {
        const uint32_t optimizer = r.get<uint32_t>("adam");
        if (optimizer != static_cast<uint32_t>(Optimizer::Adam) && optimizer != static_cast<uint32_t>(Optimizer::AdamW))
            throw Error(source + ": corrupt checkpoint (optimizer " + std::to_string(optimizer) + ")");
        c.optimizer = static_cast<Optimizer>(optimizer);
        c.adam_steps = r.get<uint64_t>("adam");
        if (n > r.remaining() / sizeof(float)) throw Error(source + ": truncated checkpoint (the adam section is incomplete)");
        c.second.resize(n);
        r.bytes(c.second.data(), n * sizeof(float), "adam");
    }
    const size_t body = in.size() - r.remaining();
    const uint32_t crc = r.get<uint32_t>("trailer");
    if (r.remaining() != 0) throw Error(source + ": corrupt checkpoint (" + std::to_string(r.remaining()) + " bytes after the CRC)");
    if (crc != crc_of(in, body)) throw Error(source + ": corrupt checkpoint (CRC-32 mismatch)");
    return c;
}

void save_checkpoint(const std::string& path, const Checkpoint& c) { write_file_atomic(path, encode_checkpoint(c)); }

Checkpoint load_checkpoint(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw Error(path + ": cannot open checkpoint: " + std::strerror(errno));
    if (S_ISDIR(st.st_mode)) throw Error(path + ": is a directory, not a checkpoint");
    // A FIFO or device would block in open or never end: refuse before opening.
    if (!S_ISREG(st.st_mode)) throw Error(path + ": not a regular file (a FIFO, device or socket cannot be a checkpoint)");
    std::ifstream f(path, std::ios::binary);
    if (!f) throw Error(path + ": cannot open checkpoint: " + std::strerror(errno));
    std::ostringstream s;
    s << f.rdbuf();
    if (f.bad()) throw Error(path + ": read failed");
    return decode_checkpoint(s.str(), path);
}

void check_network(const Checkpoint& c, const Network& net, const std::string& path) {
    if (c.network_hash != net.hash() || c.network_description != net.describe() || c.params.size() != net.param_count)
        throw Error(path + ": checkpoint is for another network (its description or hash differs from " + net.name + ")");
}

Model checkpoint_model(const Checkpoint& c, const std::string& path) {
    Model m = c.model_text.empty() ? load_model("lenet5") : parse_model(c.model_text, path + " (its model file)");
    check_network(c, m.net, path);
    return m;
}

}  // namespace lenet5

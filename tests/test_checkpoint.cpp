// Checkpoints: the format round-trips, every malformed file gives its documented
// error, resume is bit-identical to a straight run, and a save killed at any
// moment leaves a whole checkpoint.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "io/checkpoint.h"
#include "model/model_file.h"
#include "common/error.h"
#include "test_support.h"
#include "train/trainer.h"

using namespace lenet5;

namespace {

Checkpoint sample_checkpoint() {
    const Model model = load_model("lenet5");
    const Network& net = model.net;
    Checkpoint c;
    c.network_hash = net.hash();
    c.network_description = net.describe();
    c.model_text = model.text;
    c.epoch = 3;
    c.step = 17;
    c.seed = 9;
    c.rng_state = 12345;
    c.batch = 64;
    c.lr = 0.05f;
    c.momentum = 0.9f;
    c.params = init_params(net, 4);
    c.velocity = init_params(net, 5);
    return c;
}

std::string error_of(const std::string& bytes) {
    try {
        decode_checkpoint(bytes, "ck.bin");
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

std::string temp_path(const std::string& name) { return ::testing::TempDir() + "lenet5_ck_" + name; }

}  // namespace

TEST(Checkpoint, RoundTripsEveryField) {
    const Checkpoint c = sample_checkpoint();
    const std::string path = temp_path("round_trip");
    save_checkpoint(path, c);
    const Checkpoint d = load_checkpoint(path);
    EXPECT_EQ(d.network_hash, c.network_hash);
    EXPECT_EQ(d.network_description, c.network_description);
    EXPECT_EQ(d.model_text, c.model_text);
    EXPECT_EQ(d.epoch, 3u);
    EXPECT_EQ(d.step, 17u);
    EXPECT_EQ(d.seed, 9u);
    EXPECT_EQ(d.rng_state, 12345u);
    EXPECT_EQ(d.batch, 64u);
    EXPECT_EQ(d.lr, 0.05f);
    EXPECT_EQ(d.momentum, 0.9f);
    EXPECT_EQ(d.params, c.params);
    EXPECT_EQ(d.velocity, c.velocity);
    EXPECT_NO_THROW(check_network(d, lenet5_network(), path));
    EXPECT_EQ(checkpoint_model(d, path).net.describe(), lenet5_network().describe());
}

// Version 1 had no model file: such a checkpoint loads as LeNet-5.
TEST(Checkpoint, VersionOneLoadsAsLenet5) {
    Checkpoint c = sample_checkpoint();
    c.model_text.clear();
    std::string bytes = encode_checkpoint(c);
    bytes[8] = 1;
    const size_t model_len_at = 8 + 4 + 8 + 4 + c.network_description.size();
    bytes.erase(model_len_at, 4);  // version 1 has no model-file length
    const uint32_t crc = static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()),
                                                     static_cast<uInt>(bytes.size() - 4)));
    std::memcpy(&bytes[bytes.size() - 4], &crc, 4);
    const Checkpoint d = decode_checkpoint(bytes, "v1.bin");
    EXPECT_TRUE(d.model_text.empty());
    EXPECT_EQ(d.params, c.params);
    EXPECT_EQ(checkpoint_model(d, "v1.bin").net.name, "lenet5");
}

// A checkpoint of another model rebuilds that model from the file it carries.
TEST(Checkpoint, CarriesItsModelFile) {
    const Model mlp = load_model("mlp");
    Checkpoint c = sample_checkpoint();
    c.network_hash = mlp.net.hash();
    c.network_description = mlp.net.describe();
    c.model_text = mlp.text;
    c.params = init_params(mlp.net, 1);
    c.velocity = c.params;
    const Checkpoint d = decode_checkpoint(encode_checkpoint(c), "mlp.bin");
    const Model m = checkpoint_model(d, "mlp.bin");
    EXPECT_EQ(m.net.name, "mlp");
    EXPECT_EQ(m.net.loss, Loss::SquaredError);
    EXPECT_THROW(check_network(d, lenet5_network(), "mlp.bin"), Error);
}

TEST(Checkpoint, EveryMalformedFileGivesItsError) {
    const std::string good = encode_checkpoint(sample_checkpoint());
    int tried = 0;
    auto expect = [&](const std::string& bytes, const std::string& words) {
        ++tried;
        const std::string msg = error_of(bytes);
        EXPECT_NE(msg.find("ck.bin: "), std::string::npos) << msg;
        EXPECT_NE(msg.find(words), std::string::npos) << "expected '" << words << "' in: " << msg;
    };
    expect("", "empty file");
    expect("LENET5XX" + good.substr(8), "bad magic");
    expect("hello", "bad magic");
    std::string other_version = good;
    other_version[8] = 4;
    expect(other_version, "format version 4");
    // Cut inside each section: header, network, training, tensors, trailer.
    const size_t desc = sample_checkpoint().network_description.size();
    const size_t training = 8 + 4 + 8 + 4 + desc + 4 + sample_checkpoint().model_text.size();
    const size_t tensors = training + 4 + 4 + 8 + 8 + 4 + 4 + 4;
    expect(good.substr(0, 10), "header section is incomplete");
    expect(good.substr(0, 16), "network section is incomplete");
    expect(good.substr(0, 8 + 4 + 8 + 4 + desc / 2), "network section is incomplete");
    expect(good.substr(0, training + 6), "training section is incomplete");
    expect(good.substr(0, tensors + 3), "tensors section is incomplete");
    expect(good.substr(0, tensors + 8 + 1000), "tensors section is incomplete");
    expect(good.substr(0, good.size() - 2), "trailer section is incomplete");
    expect(good + "x", "bytes after the CRC");
    // A flipped byte anywhere in the body is caught by the CRC.
    for (size_t at : {training + 1, tensors + 100, good.size() - 10}) {
        std::string flipped = good;
        flipped[at] = static_cast<char>(flipped[at] ^ 0x10);
        expect(flipped, "CRC-32 mismatch");
    }
    // Another network: same format, other description and hash.
    Checkpoint other = sample_checkpoint();
    other.network_description += "extra\n";
    other.network_hash ^= 1;
    const std::string path = temp_path("other_net");
    save_checkpoint(path, other);
    try {
        check_network(load_checkpoint(path), lenet5_network(), path);
        ADD_FAILURE() << "another network's checkpoint loaded";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("for another network"), std::string::npos) << e.what();
    }
    ++tried;
    // A directory and a missing file.
    const std::string dir = temp_path("dir");
    ::mkdir(dir.c_str(), 0755);
    EXPECT_THROW(
        try { load_checkpoint(dir); } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
            throw;
        },
        Error);
    EXPECT_THROW(load_checkpoint(temp_path("missing")), Error);
    tried += 2;
    EXPECT_EQ(tried, 18);
}

TEST(Checkpoint, ResumeIsBitIdenticalToAStraightRun) {
    const std::string dir = test::mnist_dir();
    if (dir.empty()) GTEST_SKIP() << "MNIST not fetched (run data/fetch_mnist.sh)";
    TrainOptions o = test::quick_options("cpu", dir, 320, 100, 32, 4);
    const TrainResult straight = train(o);
    o.epochs = 2;
    o.save_path = temp_path("half");
    train(o);
    o.epochs = 4;
    o.resume_path = o.save_path;
    o.save_path = temp_path("resumed");
    const TrainResult resumed = train(o);
    ASSERT_EQ(resumed.epochs.size(), 2u);
    EXPECT_EQ(resumed.epochs[0].epoch, 3);
    EXPECT_EQ(resumed.params, straight.params);  // bit for bit
    EXPECT_EQ(load_checkpoint(o.save_path).params, straight.params);
}

// Adam's moments and update count go into the checkpoint: a resumed run is the straight one, bit
// for bit; another optimizer cannot continue it.
TEST(Checkpoint, AdamResumeIsBitIdenticalToAStraightRun) {
    const std::string dir = test::mnist_dir();
    if (dir.empty()) GTEST_SKIP() << "MNIST not fetched (run data/fetch_mnist.sh)";
    TrainOptions o = test::quick_options("cpu", dir, 320, 100, 32, 3);
    o.optimizer = Optimizer::Adam;
    const TrainResult straight = train(o);
    o.epochs = 2;
    o.save_path = temp_path("adam_half");
    train(o);
    const Checkpoint c = load_checkpoint(o.save_path);
    EXPECT_EQ(c.optimizer, Optimizer::Adam);
    EXPECT_EQ(c.adam_steps, 20u);  // 2 epochs of 10 steps
    o.epochs = 3;
    o.resume_path = o.save_path;
    o.save_path.clear();
    EXPECT_EQ(train(o).params, straight.params);
    o.optimizer = Optimizer::Sgd;
    try {
        train(o);
        ADD_FAILURE() << "an adam checkpoint continued with sgd";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("checkpoint was trained with adam, not sgd (give --optimizer adam)"),
                  std::string::npos)
            << e.what();
    }
}

TEST(Checkpoint, InterruptedRunResumesMidEpochBitIdentically) {
    const std::string dir = test::mnist_dir();
    if (dir.empty()) GTEST_SKIP() << "MNIST not fetched (run data/fetch_mnist.sh)";
    TrainOptions o = test::quick_options("cpu", dir, 320, 100, 32, 2);
    const TrainResult straight = train(o);
    // Stop as if SIGINT arrived during step 4 of epoch 2.
    TrainObserver stop;
    int steps_seen = 0;
    stop.on_step = [&](int epoch, int, int) { steps_seen += epoch == 2; };
    stop.stop_requested = [&] { return steps_seen == 4 ? SIGINT : 0; };
    o.save_path = temp_path("interrupted");
    const TrainResult cut = train(o, stop);
    EXPECT_EQ(cut.stopped_by, SIGINT);
    EXPECT_EQ(cut.stopped_epoch, 2);
    EXPECT_EQ(cut.stopped_step, 4);
    const Checkpoint c = load_checkpoint(o.save_path);
    EXPECT_EQ(c.epoch, 1u);
    EXPECT_EQ(c.step, 4u);
    o.resume_path = o.save_path;
    o.save_path.clear();
    EXPECT_EQ(train(o).params, straight.params);
}

// Kills a child process at random moments while it saves checkpoints in a loop:
// whatever is on disk must always load whole (the old file or the new one).
TEST(Checkpoint, SurvivesSigkillDuringSave) {
    const std::string path = temp_path("killed");
    Checkpoint c = sample_checkpoint();
    save_checkpoint(path, c);
    int survived = 0;
    for (int round = 0; round < 40; ++round) {
        const pid_t pid = fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            for (uint32_t e = 0;; ++e) {
                c.epoch = e;
                save_checkpoint(path, c);
            }
        }
        std::this_thread::sleep_for(std::chrono::microseconds(500 + 997 * (round % 23)));
        kill(pid, SIGKILL);
        int status = 0;
        waitpid(pid, &status, 0);
        const Checkpoint d = load_checkpoint(path);  // throws if torn
        EXPECT_EQ(d.params, c.params);
        ++survived;
    }
    EXPECT_EQ(survived, 40);
}

TEST(Checkpoint, DivergenceStopsNamingEpochAndStepAndKeepsTheLastCheckpoint) {
    const std::string dir = test::mnist_dir();
    if (dir.empty()) GTEST_SKIP() << "MNIST not fetched (run data/fetch_mnist.sh)";
    // A checkpoint whose parameters hold a NaN: the first loss check must stop the run.
    Checkpoint c = sample_checkpoint();
    c.epoch = 1;
    c.step = 0;
    c.params[100] = NAN;
    const std::string path = temp_path("diverging");
    save_checkpoint(path, c);
    const std::string before = encode_checkpoint(load_checkpoint(path));
    TrainOptions o = test::quick_options("cpu", dir, 6400, 100, 64, 3);
    o.resume_path = path;
    o.save_path = path;
    try {
        train(o);
        ADD_FAILURE() << "a NaN loss did not stop training";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("training diverged in epoch 2 by step 50"), std::string::npos) << e.what();
    }
    EXPECT_EQ(encode_checkpoint(load_checkpoint(path)), before);  // the last good checkpoint is kept
}

TEST(Checkpoint, OneVariantsCheckpointLoadsInEveryOther) {
    const std::string dir = test::mnist_dir();
    if (dir.empty()) GTEST_SKIP() << "MNIST not fetched (run data/fetch_mnist.sh)";
    TrainOptions o = test::quick_options("cpu", dir, 640, 500, 64, 1);
    o.save_path = temp_path("cross");
    train(o);
    const Checkpoint c = load_checkpoint(o.save_path);
    const Network net = lenet5_network();
    const Dataset test_set = load_mnist(dir, Split::Test, 500);
    double reference = -1;
    for (const std::string& variant : built_variants()) {
        if (variant == "gpu-constant") continue;  // same parameters path as gpu
        EngineRequest request;
        request.variant = variant;
        auto engine = make_engine(net, request);
        engine->upload(Split::Test, test_set);
        engine->set_params(c.params);
        engine->set_momentum_buffer(c.velocity);
        EXPECT_EQ(engine->params(), c.params) << variant;
        EXPECT_EQ(engine->momentum_buffer(), c.velocity) << variant;
        const double accuracy = evaluate(*engine, net, test_set, false).accuracy;
        if (reference < 0) reference = accuracy;
        EXPECT_NEAR(accuracy, reference, 0.005) << variant;
    }
}

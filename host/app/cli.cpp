#include "app/cli.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "conv/convbench.h"
#include "common/error.h"
#include "engine/engine_factory.h"
#include "model/layers/layer_type.h"
#include "train/worker_engine.h"

namespace lenet5 {

// ---- The help texts: `lenet5 --help` lists the commands; `lenet5 COMMAND --help` gives the
// command's own options, in groups. An option that several commands take is written once here.
namespace {

constexpr const char* kVariant =
    "  --variant V      cpu, avx, omp, gpu, gpu-constant, gpu-local or auto (default: " LENET5_DEFAULT_VARIANT ")\n"
    "                   auto = gpu-local on the first GPU of any platform, else omp, else cpu\n"
    "                   (`lenet5 --version` lists the variants this build has)\n";
constexpr const char* kDevice =
    "  --device N       OpenCL device index from `lenet5 devices` (default: first GPU, else first device)\n";
constexpr const char* kTunedGroup =
    "  --group N        OpenCL: items of each sample's work-group, a power of two (default: what\n"
    "                   `lenet5 tune` found fastest for this device, variant and batch, else 256\n"
    "                   or the device's limit if lower; the run's first line says which)\n";
constexpr const char* kThreads =
    "  --threads N      threads for omp (default: OMP_NUM_THREADS, else all cores); where layers run\n"
    "                   in groups of 8 samples (LeNet-5's), a batch of 32 or more with fewer than 8\n"
    "                   samples a thread runs on fewer threads, 8 samples each\n";
constexpr const char* kConvAlgo =
    "  --conv-algo A    OpenCL batch-level path (models like cnn, vgg): the convolutions' algorithm,\n"
    "                   direct, im2col, winograd (F(4x4,3x3) forward and input gradient of 3x3 stride-1\n"
    "                   layers over a multiple of 4 maps, at least 16; direct elsewhere; weight gradient\n"
    "                   by im2col), clblast (CLBlast's routines on the engine's queue), own (the engine's\n"
    "                   own kernels) or auto (default: what `lenet5 tune --conv` found fastest for the\n"
    "                   layer and batch on this device, own included; untuned: own)\n";
constexpr const char* kKernels =
    "  --kernels DIR    OpenCL variants: build the kernels from DIR's files (common.h and every .cl file,\n"
    "                   as `lenet5 kernels --dump DIR` writes them) instead of the embedded copies\n"
    "                   (default: $LENET5_KERNELS, which host variants ignore; else the embedded copies);\n"
    "                   the run's first line names DIR, and a build error gives the compiler's log with\n"
    "                   file and line\n";
constexpr const char* kModel =
    "  --model M        a built-in model (lenet5, the default; mlp, cnn, vgg: `lenet5 models`), a model\n"
    "                   file, or an ONNX file (FILE.onnx)\n";
constexpr const char* kDataset =
    "  --dataset D      mnist or fashion (Fashion-MNIST from Debian's dataset-fashion-mnist,\n"
    "                   /usr/share/datasets/fashion-mnist); default mnist\n";
constexpr const char* kData =
    "  --data DIR       folder with the four IDX files, raw or .gz (default: the dataset's;\n"
    "                   for mnist $LENET5_DATA, else data/mnist)\n";
constexpr const char* kTestLimit = "  --test-limit N   use only the first N test images (default: all 10000)\n";

const char* const kTrainHelp[] = {
    "usage: lenet5 train [options]\n"
    "       mpirun -np N lenet5 train [options]   (one rank a process; rank 0 prints and writes)\n"
    "\n"
    "Trains a model on MNIST (or Fashion-MNIST) and prints one table row per epoch: the milliseconds\n"
    "spent in the forward, backward and update phases (OpenCL: device time from event profiling;\n"
    "host variants: a steady clock around each phase), the epoch's wall time, the training loss and\n"
    "test accuracy. A setting's default is the model's (a model file's train line), else the one below.\n"
    "\n"
    "model and data:\n"
    "  --model M        a built-in model (lenet5, the default; mlp, cnn, vgg: `lenet5 models`), a model\n"
    "                   file, or an ONNX file (FILE.onnx: a chain of Conv, pooling, Gemm/MatMul and\n"
    "                   activations over 1xHxW images or 784 values, pixels in [0, 1] unless the graph\n"
    "                   scales them; trains from the file's weights); with --resume and no --model,\n"
    "                   the checkpoint's model\n"
    "  --init I         an ONNX model's starting weights: file (the default) or fresh (seeded, as\n"
    "                   for a model file)\n",
    kDataset,
    kData,
    "  --train-limit N  use only the first N training images (default: all 60000)\n",
    kTestLimit,
    "  --seed S         seed of the initial weights and the shuffles (default 1)\n"
    "\n"
    "optimisation and schedule:\n"
    "  --epochs N       train up to epoch N (default: the model's, else 10); --resume from a\n"
    "                   checkpoint saved after epoch 1 with --epochs 3 trains epochs 2 and 3\n"
    "  --batch B        mini-batch size (default: the model's, else 64)\n"
    "  --optimizer O    sgd, adam or adamw: torch.optim's Adam (weight decay added to the gradient)\n"
    "                   or AdamW (decoupled, p -= lr*W*p), bias-corrected per update (default: the\n"
    "                   model's, else sgd)\n"
    "  --beta1 B1       adam and adamw: the first moment's decay rate, 0 <= B1 < 1 (default: the\n"
    "                   model's, else 0.9)\n"
    "  --beta2 B2       adam and adamw: the second moment's, 0 <= B2 < 1 (default: the model's, else\n"
    "                   0.999)\n"
    "  --eps E          adam and adamw: added to the denominator, E > 0 (default: the model's, else\n"
    "                   1e-8)\n"
    "  --lr X           learning rate of the first epoch, or the peak of a schedule (default: the\n"
    "                   model's for its optimizer, else 0.05 with sgd, 0.001 with adam and adamw)\n"
    "  --lr-decay G     multiply the learning rate by G after every epoch, 0 < G <= 1, with the\n"
    "                   step schedule (default: the model's, else 0.8)\n"
    "  --momentum M     SGD momentum, 0 <= M < 1, sgd only (default: the model's, else 0.9)\n"
    "  --weight-decay W L2 weight decay, 0 <= W < 1 (default: the model's, else 0.0005)\n"
    "  --schedule S     the learning rate per step: step (x G per epoch, --lr-decay), onecycle\n"
    "                   (linear from --lr down to 0 at the run's end) or cosine (half a cosine from\n"
    "                   --lr down to 0); each one after any warm-up (default: the model's, else step)\n"
    "  --warmup E       a linear warm-up over the first E epochs (fractions allowed, rounded to\n"
    "                   whole steps): step t of W runs at (t+1)/W of the rate (default: the model's,\n"
    "                   else 0)\n"
    "  --nesterov       Nesterov momentum, sgd only (default: the model's, else off)\n"
    "  --label-smoothing E  softmax models: train towards 1-E on the label plus E/classes on\n"
    "                   every class, 0 <= E < 1 (default: the model's, else 0; the reported loss\n"
    "                   stays plain)\n"
    "                   (these and the optimizer's are also keys of a model file's train line:\n"
    "                   optimizer=, beta1=, beta2=, eps=, schedule=, warmup=, nesterov,\n"
    "                   label-smoothing=)\n"
    "\n"
    "time to accuracy:\n"
    "  --target-accuracy A  stop at the first evaluation whose test accuracy is at least A\n"
    "                   (0.99 or 99%); after the table, the time to it: training seconds, and\n"
    "                   wall seconds with the evaluations (exit 0 when it is never reached)\n"
    "  --eval-every N   also evaluate on the test set every N steps, counted from epoch 1\n"
    "                   (default: at each epoch's end only)\n"
    "\n"
    "devices and workers:\n",
    kVariant,
    kDevice,
    kTunedGroup,
    kThreads,
    kConvAlgo,
    "  --workers SPEC   train on several devices at once: a comma-separated list of workers,\n"
    "                   each [DEVICE:]VARIANT or DEVICE (gpu-local on that device), e.g.\n"
    "                   1:gpu-local,omp or 1,2; each step's batch is split between them by\n"
    "                   their speed, measured on the first batch (or by explicit shares:\n"
    "                   1:gpu-local@3,omp@1), and their gradients summed in worker order\n"
    "  --grad-precision P  several workers or ranks (mpirun): fp32 (default) or bf16, the\n"
    "                   exchanged gradients rounded to bfloat16 (to nearest even), summed in fp32\n"
    "  --sync-every K   several workers or ranks: 1 (default) sums every step's gradients; K > 1\n"
    "                   is local SGD, each worker steps on its own slice and the parameters are\n"
    "                   averaged every K steps and at the end of every epoch\n",
    kKernels,
    "\n"
    "checkpoints and output files:\n"
    "  --save FILE      write a checkpoint after every epoch and when interrupted\n"
    "  --resume FILE    continue from a checkpoint (its seed and momentum carry on)\n"
    "  --json FILE      also write the run as JSON (- for standard output)\n"
    "  --kernel-profile after training, print every OpenCL kernel's launches per step\n"
    "                   and device time (slows the epoch: each launch carries an event)\n",
};

const char* const kEvalHelp[] = {
    "usage: lenet5 eval --model CHECKPOINT [options]\n"
    "\n"
    "The test accuracy, loss and confusion matrix of a checkpoint of `train --save`.\n"
    "\n"
    "model and data:\n"
    "  --model FILE     the checkpoint (required; it carries its model)\n",
    kDataset,
    kData,
    kTestLimit,
    "\n"
    "devices:\n",
    kVariant,
    kDevice,
    "  --group N        OpenCL: items of each sample's work-group, a power of two (default: 256, or\n"
    "                   the device's limit if lower; eval does not read `lenet5 tune`'s cache)\n",
    kThreads,
    kConvAlgo,
    kKernels,
    "\n"
    "output files:\n"
    "  --json FILE      also write accuracy, loss and the confusion matrix as JSON (- for standard\n"
    "                   output)\n",
};

const char* const kTuneHelp[] = {
    "usage: lenet5 tune [options]\n"
    "       lenet5 tune --conv [--model M] [--device N] [--batch B] [--cache FILE]\n"
    "\n"
    "Times training steps on random images, so it needs no data set: each work-group size of the\n"
    "OpenCL variants, then, at the fastest group, each other setting of the per-sample kernels' knobs\n"
    "(FWD_RUN 4, 8; BWD_RUN 4; FC_LANES 8, 32), one knob after another, a setting kept when at least\n"
    "1% faster; caches the fastest, which train then uses. Tune each model and batch you train with.\n"
    "\n"
    "what to tune:\n"
    "  --model M        the model to tune for: a built-in model (lenet5, the default; mlp, cnn, vgg),\n"
    "                   a model file, or an ONNX file (FILE.onnx)\n"
    "  --variant V,...  the OpenCL variants to tune (default: gpu,gpu-constant,gpu-local)\n"
    "  --batch B        the batch size to tune for (default 64)\n",
    kDevice,
    kKernels,
    "\n"
    "the search:\n"
    "  --groups G,...   candidate work-group sizes (default: 32, 64, ... up to the device's limit, at\n"
    "                   most 1024)\n"
    "  --steps N        timed steps per candidate, in each of 3 runs (default 50)\n"
    "  --cache FILE     the tuning cache (default: $LENET5_TUNING, else\n"
    "                   $XDG_CACHE_HOME/lenet5/tuning.tsv, else ~/.cache/lenet5/tuning.tsv); train reads\n"
    "                   it from the default place\n"
    "\n"
    "convolutions:\n"
    "  --conv           instead, time the convolution algorithms (own, direct, im2col, winograd, clblast;\n"
    "                   forward and backward) on each of the model's fully connected convolutions at\n"
    "                   --batch and cache the fastest (default cache: $LENET5_CONV_TUNING, else\n"
    "                   conv-tuning.tsv beside the above), which `--conv-algo auto` of train, eval,\n"
    "                   check and infer then uses on this device\n",
};

const char* const kInferHelp[] = {
    "usage: lenet5 infer --onnx FILE | --model CHECKPOINT  --input X.npy | --random N  [options]\n"
    "\n"
    "Runs a model on the variant's engine, as a network of layers as train does: an ONNX file (a chain\n"
    "of Conv, also grouped, Relu, Sigmoid, Tanh, MaxPool, AveragePool, GlobalAveragePool, Gemm,\n"
    "MatMul, Flatten, Reshape, Identity, a Softmax at the end; Add, Sub, Mul, Div by constants and\n"
    "a constant Pad where they fold into the input or a layer; the layer kinds' own operators: ",
    // layer_onnx_ops() here (command_help)
    ";\none float input whose first dimension is the batch), or a checkpoint as `export` writes it.\n"
    "Prints one line: images, batch, ms per image, the top-1 classes of the first 10 images.\n"
    "\n"
    "model:\n"
    "  --onnx FILE      the model (external data is read from files beside it)\n"
    "  --model CK       or a checkpoint of `train --save`: its input is the images' pixels in [0, 1]\n"
    "                   (byte / 255), N x 1 x 28 x 28, its output the last layer's (as in `export`)\n"
    "\n"
    "images:\n"
    "  --input X.npy    the images: float32 .npy of shape N x (the model's input without its batch)\n"
    "  --random N       or N images uniform in [-1, 1), from --seed S\n"
    "  --seed S         the random images' seed (default 1)\n"
    "  --batch B        images per run (default 1)\n"
    "\n"
    "devices:\n"
    "  --variant V      cpu (the scalar reference), omp (all cores; Winograd for 3x3 convolutions,\n"
    "                   else GEMMs), avx (omp's code on one thread), gpu, gpu-constant, gpu-local (the\n"
    "                   batch-level engine) or auto (gpu-local on a GPU, else omp; the default)\n",
    kDevice,
    "  --threads N      threads for omp (default: OMP_NUM_THREADS, else all cores)\n"
    "  --conv-algo A    OpenCL: the convolutions' algorithm, auto, direct, im2col, winograd, clblast or\n"
    "                   own (the batch-level engine's own kernels) (default auto: Winograd F(4x4,3x3)\n"
    "                   for 3x3 stride-1 layers of 16 or more input maps (a multiple of 4); other\n"
    "                   layers what `lenet5 tune --conv` measured for the layer on this device,\n"
    "                   untuned im2col for outputs of under 2048 positions over the batch, else direct;\n"
    "                   layers with a connection table, such as LeNet-5's C3, always the engine's own\n"
    "                   kernels)\n",
    kKernels,
    "\n"
    "timing and output files:\n"
    "  --repeats R      time R passes over the images (after one untimed pass when R > 1) and\n"
    "                   report the median (default 1)\n"
    "  --output Y.npy   write the outputs, float32 .npy of shape N x (the model's output)\n"
    "  --json FILE      also write the timings (per image, per layer) and every image's top-1 class\n",
};

const char* const kCheckHelp[] = {
    "usage: lenet5 check --variant V [options]\n"
    "\n"
    "Compares one variant with the cpu reference on a few batches of MNIST's training images, by the\n"
    "rule of the tests (relative error ||v - ref|| / ||ref|| < 1e-4), in two ways:\n"
    "  layer by layer   --batches steps, each layer's output, the loss, the gradients and the updated\n"
    "                   parameters read after each phase (forward, backward, update), so the engine\n"
    "                   runs the phases apart;\n"
    "  training paths   the steps as train runs them, with nothing read between the phases: the fused\n"
    "                   steps, and at batch 1 for networks that start fully connected (the MLP) these\n"
    "                   paths instead: a launch a step (step_update), and persistent runs of 16 steps\n"
    "                   (step_run) in one work-group and in two (through the grid barrier, where the\n"
    "                   device has two compute units or more), and in as many as train runs where\n"
    "                   that is more (a GPU's); at least 2 steps taken straight through and read\n"
    "                   after the last (at batch 1: 8, also read after each step, naming the step).\n"
    "Prints a row per layer and phase with the error and pass or FAIL. On a mismatch, exit 1 with one\n"
    "line naming the layer, phase, step and path of the first failure.\n"
    "\n"
    "what to check:\n"
    "  --variant V      the variant to check (required; not cpu, the reference): avx, omp, gpu,\n"
    "                   gpu-constant, gpu-local or auto\n",
    kModel,
    "  --batch B        images per step (default: the model's, else 64)\n"
    "  --batches N      training steps compared layer by layer, each on the next batch of MNIST's\n"
    "                   training set (default 3)\n"
    "  --optimizer O    the update compared: sgd (lr 0.05, momentum 0.9), adam or adamw (lr 0.001,\n"
    "                   the default betas and eps), each with weight decay 5e-4 (default sgd)\n"
    "  --data DIR       folder with MNIST's four IDX files, raw or .gz (default: $LENET5_DATA, else\n"
    "                   data/mnist)\n"
    "\n"
    "devices:\n",
    kDevice,
    kTunedGroup,
    kThreads,
    kConvAlgo,
    kKernels,
    "\n"
    "output files:\n"
    "  --json FILE      also write every comparison as JSON (- for standard output)\n",
};

const char* const kKernelsHelp[] = {
    "usage: lenet5 kernels [options]\n"
    "       lenet5 kernels --dump DIR\n"
    "\n"
    "The kernels each OpenCL variant launches per training step: file, line, function and -D knobs\n"
    "(the map from `train --kernel-profile`'s labels to the code). Runs a few training steps of random\n"
    "images with every launch profiled.\n"
    "\n"
    "what to list:\n",
    kModel,
    "  --variant V      gpu, gpu-constant or gpu-local (default: all three)\n"
    "  --batch B        images per step (default: the model's, else 64)\n",
    kDevice,
    kKernels,
    "\n"
    "kernel files:\n"
    "  --dump DIR       instead, write the embedded kernel files into DIR, for --kernels DIR (made if\n"
    "                   missing; a file there that differs from the embedded copy is an error, not\n"
    "                   overwritten); --kernels does not apply to it\n",
};

const char* const kModelsHelp[] = {
    "usage: lenet5 models\n"
    "\n"
    "Lists every built-in model (lenet5 is the default): its parameters, loss and training settings\n"
    "(batch, learning rate and schedule, momentum, weight decay, epochs), then its layers.\n"
    "Use one with `lenet5 train --model NAME`. No options.\n",
};

const char* const kExportHelp[] = {
    "usage: lenet5 export --model CHECKPOINT --onnx OUT\n"
    "\n"
    "Writes a checkpoint's trained model as ONNX (input: [N,1,28,28] pixels in [0,1]; output: the last\n"
    "layer's values, before any softmax), which `lenet5 infer --onnx OUT` runs.\n"
    "\n"
    "files:\n"
    "  --model CHECKPOINT  a checkpoint of `train --save` (required)\n"
    "  --onnx OUT       the ONNX file to write (required)\n",
};

const char* const kDevicesHelp[] = {
    "usage: lenet5 devices\n"
    "\n"
    "Lists every OpenCL device of every platform: its index (the other commands' `--device N`), platform,\n"
    "name, type, compute units, global and local memory, largest work-group and OpenCL C version.\n"
    "No options.\n",
};

// The parts from `first` on.
template <size_t N>
std::string joined(const char* const (&parts)[N], size_t first = 0) {
    std::string text;
    for (size_t i = first; i < N; ++i) text += parts[i];
    return text;
}

}  // namespace

std::string help_text() {
    return "lenet5 " LENET5_VERSION " - train LeNet-5 (or another model) on MNIST and see where the time goes\n"
           "\n"
           "usage: lenet5 COMMAND [options]\n"
           "       lenet5 COMMAND --help     the command's options, in groups (also: lenet5 help COMMAND)\n"
           "       lenet5 --help | --version\n"
           "\n"
           "commands:\n"
           "  train      train a model, printing a row per epoch: forward, backward, update ms, loss, accuracy\n"
           "  eval       test accuracy, loss and confusion matrix of a checkpoint\n"
           "  tune       find the fastest OpenCL work-group size and kernel knobs, or convolution algorithms\n"
           "  infer      run an ONNX model (e.g. VGG16) or a checkpoint over images from an .npy file\n"
           "  convbench  time the convolution algorithms (direct, im2col, winograd, clblast) side by side\n"
           "  check      compare a variant with the cpu reference layer by layer, then as train runs it\n"
           "  kernels    list the kernels each OpenCL variant launches per training step, or write them out\n"
           "  models     list the built-in models, their parameters and settings\n"
           "  export     write a checkpoint's trained model as ONNX\n"
           "  devices    list the OpenCL devices (the index for --device)\n"
           "\n"
           "global options:\n"
           "  -h, --help  this text; after a command, that command's options\n"
           "  --version   the version, the variants built in, the default variant and what this build has\n"
           "\n"
           "Several devices: lenet5 train --workers 1:gpu-local,omp; processes: mpirun -np N lenet5 train.\n"
           "Environment: LENET5_DATA (the MNIST folder), LENET5_KERNELS (kernel files, as --kernels DIR),\n"
           "LENET5_TUNING and LENET5_CONV_TUNING (the tuning caches), OMP_NUM_THREADS (omp's threads).\n"
           "Exit status: 0 success, 1 failure, 2 bad command line, 130/143 interrupted.\n"
           "More: README.md and docs/guide.md.\n";
}

std::string command_help(const std::string& command) {
    if (command == "train") return joined(kTrainHelp);
    if (command == "eval") return joined(kEvalHelp);
    if (command == "tune") return joined(kTuneHelp);
    if (command == "infer") return kInferHelp[0] + layer_onnx_ops() + joined(kInferHelp, 1);
    if (command == "convbench") return conv::convbench_help();
    if (command == "check") return joined(kCheckHelp);
    if (command == "kernels") return joined(kKernelsHelp);
    if (command == "models") return joined(kModelsHelp);
    if (command == "export") return joined(kExportHelp);
    if (command == "devices") return joined(kDevicesHelp);
    return "";
}

namespace {

class ArgReader {
public:
    explicit ArgReader(const std::vector<std::string>& args) : args_(args) {}
    bool done() const { return pos_ >= args_.size(); }
    const std::string& next() { return args_[pos_++]; }
    std::string value(const std::string& flag) {
        if (done()) throw UsageError(flag + " needs a value");
        return next();
    }

private:
    const std::vector<std::string>& args_;
    size_t pos_ = 0;
};

long long parse_int(const std::string& flag, const std::string& text, long long lo, long long hi) {
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || errno == ERANGE)
        throw UsageError(flag + ": '" + text + "' is not a whole number");
    if (v < lo || v > hi)
        throw UsageError(flag + ": " + text + " is out of range (" + std::to_string(lo) + " to " + std::to_string(hi) + ")");
    return v;
}

int parse_count(const std::string& flag, const std::string& text, int lo) {
    return static_cast<int>(parse_int(flag, text, lo, std::numeric_limits<int>::max()));
}

// A fraction 0 < A <= 1 written as such (0.99) or as a percentage (99%).
double parse_accuracy(const std::string& flag, const std::string& text) {
    const bool percent = !text.empty() && text.back() == '%';
    const std::string number = percent ? text.substr(0, text.size() - 1) : text;
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(number.c_str(), &end);
    if (number.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
        throw UsageError(flag + ": '" + text + "' is not an accuracy (e.g. 0.99 or 99%)");
    const double fraction = percent ? v / 100.0 : v;
    if (fraction <= 0.0 || fraction > 1.0)
        throw UsageError(flag + ": " + text + " is out of range (above 0, at most 1 or 100%)");
    return fraction;
}

int parse_power_of_two(const std::string& flag, const std::string& text) {
    const int v = parse_count(flag, text, 1);
    if (v & (v - 1)) throw UsageError(flag + ": " + text + " is not a power of two");
    return v;
}

float parse_float(const std::string& flag, const std::string& text, float lo, float hi, bool hi_open) {
    errno = 0;
    char* end = nullptr;
    const float v = std::strtof(text.c_str(), &end);
    if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
        throw UsageError(flag + ": '" + text + "' is not a number");
    if (v < lo || v > hi || (hi_open && v == hi))
        throw UsageError(flag + ": " + text + " is out of range");
    return v;
}

// Flags that train and eval share. Returns false if `flag` is not one of them.
bool parse_common(const std::string& flag, ArgReader& r, EngineRequest& engine, std::string& data_dir,
                  std::string& dataset, std::string& json_path, int& test_limit) {
    if (flag == "--variant") engine.variant = r.value(flag);
    else if (flag == "--dataset") {
        dataset = r.value(flag);
        if (dataset != "mnist" && dataset != "fashion")
            throw UsageError(flag + ": '" + dataset + "' is not a data set (mnist, fashion)");
    }
    else if (flag == "--device") engine.device = parse_count(flag, r.value(flag), 0);
    else if (flag == "--group") engine.group = parse_power_of_two(flag, r.value(flag));
    else if (flag == "--conv-algo") engine.conv_algo = conv::parse_algo(r.value(flag));
    else if (flag == "--data") data_dir = r.value(flag);
    else if (flag == "--json") json_path = r.value(flag);
    else if (flag == "--test-limit") test_limit = parse_count(flag, r.value(flag), 1);
    else return false;
    if ((flag == "--data" || flag == "--json") && (flag == "--data" ? data_dir : json_path).empty())
        throw UsageError(flag + " needs a non-empty value");
    if (flag == "--data" && data_dir == "-")
        throw UsageError("--data: '-' is not accepted: the data is a folder of IDX files, not a stream");
    return true;
}

// A comma-separated list, each item checked by `item`.
template <class F>
void for_each_listed(const std::string& flag, const std::string& text, F item) {
    size_t start = 0;
    for (;;) {
        const size_t comma = text.find(',', start);
        const std::string part = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (part.empty()) throw UsageError(flag + ": '" + text + "' has an empty item");
        item(part);
        if (comma == std::string::npos) return;
        start = comma + 1;
    }
}

void parse_tune_option(const std::string& flag, ArgReader& r, TuneOptions& t) {
    if (flag == "--variant") {
        t.variants.clear();
        for_each_listed(flag, r.value(flag), [&](const std::string& v) {
            if (!is_opencl_variant(v))
                throw UsageError(flag + ": '" + v + "' is not an OpenCL variant (" + listed(opencl_variants()) + ")");
            t.variants.push_back(v);
        });
    } else if (flag == "--model") {
        t.model = r.value(flag);
        if (t.model.empty()) throw UsageError(flag + " needs a non-empty value");
    } else if (flag == "--device") t.device = parse_count(flag, r.value(flag), 0);
    else if (flag == "--batch") t.batch = parse_count(flag, r.value(flag), 1);
    else if (flag == "--steps") t.steps = parse_count(flag, r.value(flag), 1);
    else if (flag == "--groups") {
        t.groups.clear();
        for_each_listed(flag, r.value(flag), [&](const std::string& g) { t.groups.push_back(parse_power_of_two(flag, g)); });
    } else if (flag == "--conv") t.conv = true;
    else if (flag == "--cache") {
        t.cache_path = r.value(flag);
        if (t.cache_path.empty()) throw UsageError(flag + " needs a non-empty value");
    } else throw UsageError("unknown option '" + flag + "' for tune (try `lenet5 tune --help`)");
}

void parse_infer_option(const std::string& flag, ArgReader& r, InferOptions& o) {
    auto path = [&](std::string& into) {
        into = r.value(flag);
        if (into.empty()) throw UsageError(flag + " needs a non-empty value");
    };
    if (flag == "--onnx") path(o.onnx_path);
    else if (flag == "--model") path(o.model_path);
    else if (flag == "--input") path(o.input_path);
    else if (flag == "--output") path(o.output_path);
    else if (flag == "--json") path(o.json_path);
    else if (flag == "--random") o.random = parse_count(flag, r.value(flag), 1);
    else if (flag == "--seed") o.seed = static_cast<uint64_t>(parse_int(flag, r.value(flag), 0, std::numeric_limits<long long>::max()));
    else if (flag == "--repeats") o.repeats = parse_count(flag, r.value(flag), 1);
    else if (flag == "--batch") o.batch = parse_count(flag, r.value(flag), 1);
    else if (flag == "--variant") {
        o.engine.variant = r.value(flag);
        const std::string& v = o.engine.variant;
        const auto& known = known_variants();
        if (v != "auto" && std::find(known.begin(), known.end(), v) == known.end())
            throw UsageError(flag + ": '" + v + "' is not an infer variant (" + listed(known) + ", auto)");
    } else if (flag == "--device") o.engine.device = parse_count(flag, r.value(flag), 0);
    else if (flag == "--threads") o.engine.threads = parse_count(flag, r.value(flag), 1);
    else if (flag == "--conv-algo") o.engine.conv_algo = conv::parse_algo(r.value(flag));
    else throw UsageError("unknown option '" + flag + "' for infer (try `lenet5 infer --help`)");
}

// A flag's value that must not be empty.
std::string non_empty(const std::string& flag, ArgReader& r) {
    std::string v = r.value(flag);
    if (v.empty()) throw UsageError(flag + " needs a non-empty value");
    return v;
}

void parse_check_option(const std::string& flag, ArgReader& r, CheckOptions& o) {
    if (flag == "--variant") o.engine.variant = non_empty(flag, r);
    else if (flag == "--model") o.model = non_empty(flag, r);
    else if (flag == "--batch") o.batch = parse_count(flag, r.value(flag), 1);
    else if (flag == "--batches") o.batches = parse_count(flag, r.value(flag), 1);
    else if (flag == "--optimizer") {
        const std::string v = r.value(flag);
        const auto optimizer = parse_optimizer(v);
        if (!optimizer) throw UsageError(flag + ": '" + v + "' is not sgd, adam or adamw");
        o.engine.rule.optimizer = *optimizer;
    }
    else if (flag == "--device") o.engine.device = parse_count(flag, r.value(flag), 0);
    else if (flag == "--group") o.engine.group = parse_power_of_two(flag, r.value(flag));
    else if (flag == "--threads") o.engine.threads = parse_count(flag, r.value(flag), 1);
    else if (flag == "--conv-algo") o.engine.conv_algo = conv::parse_algo(r.value(flag));
    else if (flag == "--data") o.data_dir = non_empty(flag, r);
    else if (flag == "--json") o.json_path = non_empty(flag, r);
    else throw UsageError("unknown option '" + flag + "' for check (try `lenet5 check --help`)");
}

void parse_kernels_option(const std::string& flag, ArgReader& r, KernelsOptions& o) {
    if (flag == "--variant") {
        o.variant = r.value(flag);
        if (!is_opencl_variant(o.variant))
            throw UsageError(flag + ": '" + o.variant + "' is not an OpenCL variant (" + listed(opencl_variants()) + ")");
    } else if (flag == "--model") o.model = non_empty(flag, r);
    else if (flag == "--batch") o.batch = parse_count(flag, r.value(flag), 1);
    else if (flag == "--device") o.device = parse_count(flag, r.value(flag), 0);
    else if (flag == "--dump") o.dump_dir = non_empty(flag, r);
    else throw UsageError("unknown option '" + flag + "' for kernels (try `lenet5 kernels --help`)");
}

}  // namespace

bool takes_kernel_folder(Command::Kind kind) {
    using K = Command::Kind;
    return kind == K::Train || kind == K::Eval || kind == K::Tune || kind == K::Infer || kind == K::Check ||
           kind == K::Kernels;
}

Command parse_command_line(const std::vector<std::string>& args) {
    Command cmd;
    if (args.empty()) throw UsageError("no command given (try `lenet5 --help`)");
    ArgReader r(args);
    const std::string& name = r.next();
    if (name == "--help" || name == "-h" || name == "help") {  // lenet5 help [COMMAND]
        if (!r.done()) cmd.help_command = r.next();
        if (!cmd.help_command.empty() && command_help(cmd.help_command).empty())
            throw UsageError("unknown command '" + cmd.help_command + "' (try `lenet5 --help`)");
        if (!r.done()) throw UsageError("help takes one command (try `lenet5 --help`)");
        return cmd;
    }
    if (name == "--version") {
        cmd.kind = Command::Kind::Version;
        return cmd;
    }
    if (name == "devices") cmd.kind = Command::Kind::Devices;
    else if (name == "models") cmd.kind = Command::Kind::Models;
    else if (name == "train") cmd.kind = Command::Kind::Train;
    else if (name == "eval") cmd.kind = Command::Kind::Eval;
    else if (name == "tune") cmd.kind = Command::Kind::Tune;
    else if (name == "export") cmd.kind = Command::Kind::Export;
    else if (name == "infer") cmd.kind = Command::Kind::Infer;
    else if (name == "check") cmd.kind = Command::Kind::Check;
    else if (name == "kernels") cmd.kind = Command::Kind::Kernels;
    else throw UsageError("unknown command '" + name + "' (try `lenet5 --help`)");
    // COMMAND --help, wherever it stands among the command's flags: the command's options.
    if (std::find(args.begin() + 1, args.end(), "--help") != args.end() ||
        std::find(args.begin() + 1, args.end(), "-h") != args.end()) {
        cmd.kind = Command::Kind::Help;
        cmd.help_command = name;
        return cmd;
    }

    TrainOptions& t = cmd.train;
    EvalOptions& e = cmd.eval;
    t.engine.variant = e.engine.variant = LENET5_DEFAULT_VARIANT;
    cmd.check.engine.variant.clear();  // required
    while (!r.done()) {
        const std::string& flag = r.next();
        if (flag == "--kernels" && takes_kernel_folder(cmd.kind)) {
            cmd.kernels_dir = non_empty(flag, r);
            continue;
        }
        if (cmd.kind == Command::Kind::Train) {
            if (parse_common(flag, r, t.engine, t.data_dir, t.dataset, t.json_path, t.test_limit)) continue;
            if (flag == "--model") {
                t.model = r.value(flag);
                if (t.model.empty()) throw UsageError(flag + " needs a non-empty value");
            } else if (flag == "--workers") {
                t.engine.workers = r.value(flag);
                parse_workers(t.engine.workers);  // a malformed list is a usage error now
            } else if (flag == "--threads") t.engine.threads = parse_count(flag, r.value(flag), 1);
            else if (flag == "--grad-precision") t.exchange.precision = parse_grad_precision(r.value(flag));
            else if (flag == "--sync-every") t.exchange.sync_every = parse_count(flag, r.value(flag), 1);
            else if (flag == "--epochs") t.epochs = parse_count(flag, r.value(flag), 1);
            else if (flag == "--batch") t.batch = parse_count(flag, r.value(flag), 1);
            else if (flag == "--lr") t.lr = parse_float(flag, r.value(flag), 0.0f, 10.0f, false);
            else if (flag == "--lr-decay") t.lr_decay = parse_float(flag, r.value(flag), 0.0f, 1.0f, false);
            else if (flag == "--weight-decay") t.weight_decay = parse_float(flag, r.value(flag), 0.0f, 1.0f, true);
            else if (flag == "--momentum") t.momentum = parse_float(flag, r.value(flag), 0.0f, 1.0f, true);
            else if (flag == "--schedule") {
                const std::string v = r.value(flag);
                t.schedule = parse_schedule(v);
                if (!t.schedule) throw UsageError(flag + ": '" + v + "' is not step, onecycle or cosine");
            } else if (flag == "--warmup") t.warmup = parse_float(flag, r.value(flag), 0.0f, 1e5f, false);
            else if (flag == "--nesterov") t.nesterov = true;
            else if (flag == "--optimizer") {
                const std::string v = r.value(flag);
                t.optimizer = parse_optimizer(v);
                if (!t.optimizer) throw UsageError(flag + ": '" + v + "' is not sgd, adam or adamw");
            } else if (flag == "--beta1") t.beta1 = parse_float(flag, r.value(flag), 0.0f, 1.0f, true);
            else if (flag == "--beta2") t.beta2 = parse_float(flag, r.value(flag), 0.0f, 1.0f, true);
            else if (flag == "--eps") t.eps = parse_float(flag, r.value(flag), 1e-30f, 1.0f, false);
            else if (flag == "--label-smoothing") t.label_smoothing = parse_float(flag, r.value(flag), 0.0f, 1.0f, true);
            else if (flag == "--target-accuracy") t.target_accuracy = parse_accuracy(flag, r.value(flag));
            else if (flag == "--eval-every") t.eval_every = parse_count(flag, r.value(flag), 1);
            else if (flag == "--seed") t.seed = static_cast<uint64_t>(parse_int(flag, r.value(flag), 0, std::numeric_limits<long long>::max()));
            else if (flag == "--train-limit") t.train_limit = parse_count(flag, r.value(flag), 1);
            else if (flag == "--save") t.save_path = r.value(flag);
            else if (flag == "--resume") t.resume_path = r.value(flag);
            else if (flag == "--kernel-profile") t.kernel_profile = true;
            else if (flag == "--init") {
                const std::string v = r.value(flag);
                if (v != "fresh" && v != "file") throw UsageError(flag + ": '" + v + "' is not fresh or file");
                t.init_fresh = v == "fresh";
            } else throw UsageError("unknown option '" + flag + "' for train (try `lenet5 train --help`)");
        } else if (cmd.kind == Command::Kind::Eval) {
            if (parse_common(flag, r, e.engine, e.data_dir, e.dataset, e.json_path, e.test_limit)) continue;
            if (flag == "--model") e.model_path = r.value(flag);
            else if (flag == "--threads") e.engine.threads = parse_count(flag, r.value(flag), 1);
            else throw UsageError("unknown option '" + flag + "' for eval (try `lenet5 eval --help`)");
        } else if (cmd.kind == Command::Kind::Tune) {
            parse_tune_option(flag, r, cmd.tune);
        } else if (cmd.kind == Command::Kind::Infer) {
            parse_infer_option(flag, r, cmd.infer);
        } else if (cmd.kind == Command::Kind::Check) {
            parse_check_option(flag, r, cmd.check);
        } else if (cmd.kind == Command::Kind::Kernels) {
            parse_kernels_option(flag, r, cmd.kernels);
        } else if (cmd.kind == Command::Kind::Export) {
            std::string& path = flag == "--model" ? cmd.exporting.model_path : cmd.exporting.onnx_path;
            if (flag != "--model" && flag != "--onnx")
                throw UsageError("unknown option '" + flag + "' for export (try `lenet5 export --help`)");
            path = r.value(flag);
            if (path.empty()) throw UsageError(flag + " needs a non-empty value");
        } else {
            throw UsageError("unknown option '" + flag + "' for " + name + " (try `lenet5 " + name + " --help`)");
        }
    }
    if (cmd.kind == Command::Kind::Train && t.lr == 0.0f) throw UsageError("--lr must be greater than 0");
    if (cmd.kind == Command::Kind::Train && t.lr_decay == 0.0f) throw UsageError("--lr-decay must be greater than 0");
    if (cmd.kind == Command::Kind::Eval && e.model_path.empty()) throw UsageError("eval needs --model FILE");
    if (cmd.kind == Command::Kind::Infer && cmd.infer.onnx_path.empty() == cmd.infer.model_path.empty())
        throw UsageError("infer needs one of --onnx FILE and --model CHECKPOINT");
    if (cmd.kind == Command::Kind::Infer && cmd.infer.input_path.empty() == (cmd.infer.random == 0))
        throw UsageError("infer needs one of --input X.npy and --random N");
    if (cmd.kind == Command::Kind::Check && cmd.check.engine.variant.empty())
        throw UsageError("check needs --variant V (the variant to compare with cpu)");
    if (cmd.kind == Command::Kind::Check && cmd.check.engine.variant == "cpu")
        throw UsageError("check --variant cpu: cpu is the reference; name another variant");
    if (cmd.kind == Command::Kind::Kernels && !cmd.kernels.dump_dir.empty() && !cmd.kernels_dir.empty())
        throw UsageError("kernels --dump writes the embedded files; --kernels does not apply to it");
    if (cmd.kind == Command::Kind::Export && (cmd.exporting.model_path.empty() || cmd.exporting.onnx_path.empty()))
        throw UsageError("export needs --model CHECKPOINT and --onnx FILE");
    return cmd;
}

}  // namespace lenet5

// The engine of the OpenCL variants. Everything stays on the device: both data sets
// (converted once), the parameters, gradients, momentum and activations. A training step is
// two kernel launches (cl_kernels/step.cl): forward(Train) runs one work-group per sample through
// every layer of the network and back (step_samples; the layers' calls are written by
// opencl_program.cpp), and update() adds the samples' contributions up into the gradients as it
// applies them (gradients_update; gradients_sgd at batch 1, seed 004's recipe), unless something
// needs the gradients first (gradients(), the next forward, an exchange), which then get them from
// the gradients kernel and update() from sgd_momentum. The results are the same. Per epoch only
// the order goes up and the per-sample losses and hits come back.
//
// Fused launches count as Phase::Fused: one step in FusedSteps::kProbeEvery (the first of each
// epoch) runs phase by phase instead (a probe: forward_samples, then backward_samples and
// gradients, then sgd_momentum, each phase timed; at batch 1 as a batch of one), and the fused
// time is split in the probes' proportions. The launches of one training step in kTimeEvery carry
// events (on NVIDIA's driver they cost about 5 us of a step's 57 at batch 64), and take_times
// scales them up to all the steps.
//
// A network that starts fully connected (the MLP) would spend a batch-1 step in one work-group
// reading the first layer's weights, so its step is spread: forward(Train) computes the first
// layer's rows in many groups (first_forward), and update() runs the rest of the network, the
// loss, the backward and every gradient and update in one launch (step_update: each group
// computes the small tail itself, then updates its share of the parameters, then its first-layer
// rows of the next sample). Anything that needs the tail's results first (the loss, gradients(),
// layer outputs, another forward) gets it in one group (tail_step), then the steps above. A probe
// runs first_forward, then the tail's forward alone (tail_forward), and the deltas, gradients and
// update as a batch of one.
//
// By default such steps run persistently (step_run): update() only records a step, and a run of
// consecutive steps goes to the device as one launch whose groups loop over the steps with a
// grid-wide barrier between them, once kRunSteps are recorded or as soon as anything needs their
// results or changes what they read (another kind of step, a probe, other rates, the counters, the
// times, the parameters, the order). LENET5_PERSISTENT=0 runs a launch a step (step_update).
#pragma once
#include <array>
#include <memory>
#include <string>

#include "opencl/opencl_engine_base.h"
#include "opencl/opencl_program.h"

namespace lenet5 {

class OpenCLEngine final : public OpenCLEngineBase {
public:
    // group: items per sample's work-group, a power of two (0: the default, 256 or the device's
    // limit if lower); group_origin says where it came from (device() shows it).
    // knobs: the kernels' knob settings (opencl_program.h's knob_options; "": their defaults).
    // rule: compiled into the kernels (opencl_engine_base.h).
    OpenCLEngine(Network net, MemoryVariant memory, std::shared_ptr<DeviceRuntime> runtime, int group = 0,
                 std::string group_origin = "default", std::string knobs = "", const TrainingRule& rule = {});

    int group() const { return static_cast<int>(group_); }

    std::string device() const override;

    // The persistent path (step_run) for tests and comparisons: runs of up to `steps` batch-1 steps
    // a launch (0: off, a launch a step), in `groups` work-groups (0: one per compute unit on a GPU,
    // at most one per first-layer row; one on other devices), a grid barrier giving up after
    // `spin_limit` reads of its counter (0: the device's default). Runs already recorded go first.
    void set_step_runs(int steps, int groups = 0, unsigned spin_limit = 0);
    // Whether a batch-1 training step fuses the tail with the update (step_update), and so can run
    // persistently (step_run): the kernels that `lenet5 check` must run as well.
    bool fuses_batch_one_steps() const { return fuse_tail_; }
    size_t compute_units() const { return rt_->compute_units(); }
    int step_run_groups() const { return run_groups_; }  // the persistent path's work-groups
    // Whether step_run may run in several groups here (not where PoCL 3.1 miscompiles it).
    bool runs_groups() const { return !rt_->device().miscompiles_step_run_groups; }

    void forward(Split split, int first, int count) override;
    void backward() override;
    void update(float lr, float momentum, float weight_decay) override;
    std::vector<float> layer_output(size_t layer) override;

private:
    // One kernel with its fixed arguments set; sized() gives it its range for a batch. per_sample:
    // count work-groups of group_ items; otherwise `items` items (rounded up) in groups of wg_.
    struct Launch {
        KernelLaunch run;    // its kernel, its range (sized()) and its name in the per-kernel profile
        bool per_sample = false;
        size_t items = 1;
        int count_arg = -1;  // the argument that takes the batch count, if any
        size_t groups = 0;   // if not 0: this many work-groups of group_ items (the SPREAD_FIRST kernels)
    };

    void settle() override {
        finish_tail();
        flush_steps();
    }
    void flush_steps() override;
    void complete_gradients() override {
        compute_pending_gradients();
        flush_steps();
    }
    void gradients_given() override {
        flush_steps();
        gradients_pending_ = false;
    }
    void params_replaced() override;
    void inputs_changed(Split split, bool slots_replaced) override;

    void build_program(int group);
    void plan_batch(int capacity);
    void check_local_memory(const cl::Kernel& kernel) const;
    // The launch with its range (and count argument) for a batch of `count`.
    const KernelLaunch* sized(Launch& launch, int count);
    void poison_activations();
    void compute_pending_gradients();
    void finish_tail();
    // The persistent path: its buffers and launch; a step recorded by update(); the recorded run
    // enqueued (at most one launch); its error flag read back, an Error if a barrier gave up.
    void plan_run();
    bool groups_run_at_once();
    void record_run_step(const std::array<float, 3>& rates);
    void launch_run();
    void check_runs();

    std::string group_origin_, knobs_;
    size_t group_ = 0;  // items per sample's work-group (SG)
    size_t grad_params_ = 0;  // the gradients kernel's parameters per work-group (of wg_ items)
    SampleProgram sample_;

    cl::Buffer run_params_;  // the pairs' parameters: a sub-buffer of params_ (__constant for gpu-constant)
    Launch forward_, backward_, gradients_, update_;
    Launch step_;                  // a fused step's forward + backward
    Launch gradients_sgd_;         // batch 1: gradients + update
    Launch gradients_update_;      // larger batches: gradients + update
    Launch gradients_one_;         // batch 1: the gradients alone (a probe's; step_gradients for a spread network)
    bool fused_step_ = false;  // the last forward() began a fused training step (not a probe)
    bool gradients_pending_ = false;  // a fused step's backward() left its gradients to update()
    // Batch 1 of a network that starts fully connected (sample_.spread): first_forward over many
    // groups, then the tail (the other layers, the loss and the deltas) either fused into the
    // update (step_update, when the tail's parameters are few: fuse_tail_) or in one group
    // (tail_step) when something needs its results first. snapshot_: the tail's parameters as the
    // step's forward saw them; own_rows_, spread_work_: step_update's groups' rows and work areas.
    // tail_forward_: the tail's forward alone, for a probe.
    Launch first_, tail_, tail_forward_, step_update_;
    cl::Buffer snapshot_, own_rows_, spread_work_;
    // step_update also computes the next training sample's first layer (so that a run of batch-1
    // steps is one launch each) into slot 1 or 2 (spread_acts_[i], spread_snapshots_[i]: its input
    // and first-layer outputs, the tail's parameters after the update); slot 0 is acts_ and
    // snapshot_, first_forward's. cur_slot_: the pending step's; prepared_first_: the training
    // sample whose first layer is in prepared_slot_ (-1: none, or no longer valid).
    cl::Buffer spread_acts_[2], spread_snapshots_[2];
    int cur_slot_ = 0, prepared_first_ = -1, prepared_slot_ = 0, step_first_ = 0, step_slot_ = 0;
    bool spread_args_set_ = false;                  // step_update's data set arguments
    std::array<float, 3> step_update_rates_{-1.0f, -1.0f, -1.0f};  // its learning rate, momentum, decay
    bool fuse_tail_ = false;
    bool tail_pending_ = false;  // a batch-1 forward() ran only first_forward
    // The persistent path (step_run): at most run_max_ steps a launch (0: off) in run_groups_
    // groups, a barrier's wait bounded by spin_limit_ reads. The recorded run: run_count_ steps
    // from training sample run_first_ (loss slot run_cursor_, its first layer in slot run_slot_) at
    // run_rates_; joined_: the pending forward() continues it (its first layer comes from the run).
    // run_rows_, tails_, run_work_: the groups' rows, tail copies and work areas; sync_: the
    // barrier's counter and error flag; runs_unchecked_: a run went since the flag was last read.
    Launch run_;
    cl::Buffer run_rows_, tails_, run_work_, sync_;
    int run_max_ = 0, run_groups_ = 1, run_first_ = 0, run_cursor_ = 0, run_slot_ = 0, run_count_ = 0;
    unsigned spin_limit_ = 1;
    std::string grid_note_;  // why step_run runs in fewer groups than asked, if it does
    std::array<float, 3> run_rates_{};
    bool joined_ = false, runs_unchecked_ = false;

    // Per sample of the batch: its activations and deltas ([capacity][act_floats], see step.cl),
    // its share of the pairs' gradients ([capacity][run_floats]); the groups' work areas
    // (gpu, gpu-constant: __global, [capacity][work floats]).
    cl::Buffer acts_, deltas_, partials_, work_;
    cl::Buffer sums_;  // the gradients kernel's lane sums (gpu, gpu-constant: __global, a slice per group)
    int capacity_ = 0, count_ = 0;
    bool last_was_train_ = false;
};

}  // namespace lenet5

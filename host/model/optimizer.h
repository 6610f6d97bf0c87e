// The optimizers a training run may use (train --optimizer, the model file's train line); their
// update rules are in cpu_opt/update_rule.h and cl_kernels/update_rule.h.
#pragma once
#include <optional>
#include <string>

namespace lenet5 {

enum class Optimizer { Sgd, Adam, AdamW };

inline const char* optimizer_name(Optimizer o) { return o == Optimizer::Adam ? "adam" : o == Optimizer::AdamW ? "adamw" : "sgd"; }

inline std::optional<Optimizer> parse_optimizer(const std::string& name) {
    for (Optimizer o : {Optimizer::Sgd, Optimizer::Adam, Optimizer::AdamW})
        if (name == optimizer_name(o)) return o;
    return std::nullopt;
}

}  // namespace lenet5

// Trains one step through the installed library: the loss must be finite and the
// parameters must change. Exits 1 with one line otherwise.
#include <lenet5/engine/engine_factory.h>
#include <lenet5/io/mnist.h>
#include <lenet5/model/network.h>
#include <lenet5/common/rng.h>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
    using namespace lenet5;
    const Network net = lenet5_network();
    EngineRequest request;
    request.variant = "cpu";
    auto engine = make_engine(net, request);
    const int batch = 16;
    engine->upload(Split::Train, random_dataset(batch, 1));
    const std::vector<float> before = init_params(net, 1);
    engine->set_params(before);
    Rng rng(2);
    engine->set_order(shuffled_order(batch, rng));
    engine->forward(Split::Train, 0, batch);
    engine->backward();
    engine->update(0.01f, 0.9f, 0.0005f);
    const Counters c = engine->take_counters();
    const double loss = c.loss_sum / static_cast<double>(c.samples);
    if (c.samples != batch || !std::isfinite(loss) || engine->params() == before) {
        std::fprintf(stderr, "install_consumer: error: the step did not train (loss %g over %lld samples)\n", loss,
                     static_cast<long long>(c.samples));
        return 1;
    }
    std::printf("install_consumer: one step of %s on %s, loss %.4f\n", net.name.c_str(), engine->variant().c_str(), loss);
    return 0;
}

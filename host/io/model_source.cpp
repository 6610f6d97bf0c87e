#include "io/model_source.h"

#include "common/error.h"
#ifdef LENET5_HAVE_ONNX
#include "io/onnx_import.h"
#endif

namespace lenet5 {

Model open_model(const std::string& name_or_path) {
    const std::string ext = ".onnx";
    const bool onnx = name_or_path.size() > ext.size() &&
                      name_or_path.compare(name_or_path.size() - ext.size(), ext.size(), ext) == 0;
    if (!onnx) return load_model(name_or_path);
#ifdef LENET5_HAVE_ONNX
    return read_onnx_model_for_training(name_or_path);
#else
    throw Error(name_or_path + ": this build has no ONNX support (install libonnx-dev and rebuild)");
#endif
}

}  // namespace lenet5

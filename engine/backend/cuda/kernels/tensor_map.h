// Host side of the Tensor Memory Accelerator (TMA): the descriptor a kernel
// passes to cp.async.bulk.tensor to copy a 2D box of a row-major bf16 matrix
// into shared memory in wgmma's 128-byte swizzled layout (wgmma.cuh).
//
// The descriptor is built by the driver's cuTensorMapEncodeTiled, reached
// through the runtime's entry-point query so the backend keeps linking the
// static runtime only. Encoding is pure host work (no device call, no
// allocation): launchers encode at every launch and pass the 128-byte result
// by value as a __grid_constant__ parameter, which a CUDA graph captures.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ernie::cuda {

// A [rows, cols] bf16 matrix, rows `row_stride` elements apart, read in
// boxes of box_rows x 64 columns (64 bf16 = the 128-byte swizzle span);
// reads past `rows` or `cols` fill zeros. cudaErrorInvalidValue when the
// matrix breaks the TMA's rules (base 16-byte aligned, row_stride x 2 a
// multiple of 16, box_rows 1 - 256) or the driver refuses it.
cudaError_t EncodeBf16TensorMap128B(CUtensorMap* map, const __nv_bfloat16* base, int64_t rows, int64_t cols,
                                    int64_t row_stride, int32_t box_rows);

}  // namespace ernie::cuda

/*
 * vta_runtime.h -- the VTA runtime C API that vtatune's program.c calls.
 *
 * Shipped with vtatune (vtatune/builds/data/vta_runtime.h). The declarations follow TVM's
 * vta/runtime/runtime.h (signatures, argument order, stage numbers) so that a program.c
 * links against TVM's libvta; the constants follow TVM's hw_spec.h. Nothing here is
 * implemented by vtatune: the header only lets program.c compile on its own (gcc -c).
 */
#ifndef VTATUNE_VTA_RUNTIME_H_
#define VTATUNE_VTA_RUNTIME_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef TVM_DLL
#define TVM_DLL
#endif

/* Pipeline stages, as DepPush/DepPop number them (from_qid, to_qid). */
#ifndef VTA_STAGE_LOAD
#define VTA_STAGE_LOAD 1
#define VTA_STAGE_COMPUTE 2
#define VTA_STAGE_STORE 3
#endif

/* Memory ids (dst_memory_type of VTALoadBuffer2D, src_memory_type of VTAStoreBuffer2D). */
#ifndef VTA_MEM_ID_UOP
#define VTA_MEM_ID_UOP 0
#define VTA_MEM_ID_WGT 1
#define VTA_MEM_ID_INP 2
#define VTA_MEM_ID_ACC 3
#define VTA_MEM_ID_OUT 4
#define VTA_MEM_ID_ACC_8BIT 5
#endif

/* ALU opcodes (VTAUopPush's opcode in ALU mode). */
#ifndef VTA_ALU_OPCODE_MIN
#define VTA_ALU_OPCODE_MIN 0
#define VTA_ALU_OPCODE_MAX 1
#define VTA_ALU_OPCODE_ADD 2
#define VTA_ALU_OPCODE_SHR 3
#define VTA_ALU_OPCODE_MUL 4
#endif

/* VTAUopPush's mode. */
#define VTA_UOP_GEMM 0
#define VTA_UOP_ALU 1

/*! \brief The runtime's command queue of the calling thread. */
typedef void* VTACommandHandle;

TVM_DLL void* VTABufferAlloc(size_t size);
TVM_DLL void VTABufferFree(void* buffer);
TVM_DLL void VTABufferCopy(const void* from, size_t from_offset, void* to, size_t to_offset,
                           size_t size, int kind_mask);
TVM_DLL VTACommandHandle VTATLSCommandHandle(void);
TVM_DLL void* VTABufferCPUPtr(VTACommandHandle cmd, void* buffer);
TVM_DLL void VTASetDebugMode(VTACommandHandle cmd, int debug_flag);

/*! \brief 2D DMA DRAM -> SRAM; sizes and offsets in elements of the memory type. */
TVM_DLL void VTALoadBuffer2D(VTACommandHandle cmd, void* src_dram_addr, uint32_t src_elem_offset,
                             uint32_t x_size, uint32_t y_size, uint32_t x_stride,
                             uint32_t x_pad_before, uint32_t y_pad_before, uint32_t x_pad_after,
                             uint32_t y_pad_after, uint32_t dst_sram_index,
                             uint32_t dst_memory_type);

/*! \brief 2D DMA SRAM -> DRAM. */
TVM_DLL void VTAStoreBuffer2D(VTACommandHandle cmd, uint32_t src_sram_index,
                              uint32_t src_memory_type, void* dst_dram_addr,
                              uint32_t dst_elem_offset, uint32_t x_size, uint32_t y_size,
                              uint32_t x_stride);

/*! \brief Record one micro-op of the kernel being initialised (mode 0 GEMM, 1 ALU). */
TVM_DLL void VTAUopPush(uint32_t mode, uint32_t reset_out, uint32_t dst_index,
                        uint32_t src_index, uint32_t wgt_index, uint32_t opcode,
                        uint32_t use_imm, int32_t imm_val);

/*! \brief Open / close one of the (at most two) loops of the kernel being initialised. */
TVM_DLL void VTAUopLoopBegin(uint32_t extent, uint32_t dst_factor, uint32_t src_factor,
                             uint32_t wgt_factor);
TVM_DLL void VTAUopLoopEnd(void);

/*! \brief Issue a GEMM / ALU instruction over a cached micro-op kernel; finit records the
 *  kernel on first use (per uop_handle and signature). Return 0 on success. */
TVM_DLL int VTAPushGEMMOp(void** uop_handle, int (*finit)(void*), void* signature, int nbytes);
TVM_DLL int VTAPushALUOp(void** uop_handle, int (*finit)(void*), void* signature, int nbytes);

/*! \brief Dependency tokens between stages (1 load, 2 compute, 3 store). */
TVM_DLL int VTADepPush(VTACommandHandle cmd, int from_qid, int to_qid);
TVM_DLL int VTADepPop(VTACommandHandle cmd, int from_qid, int to_qid);

/*! \brief Commit the stream (FINISH), run it and wait at most wait_cycles polls.
 *  TVM declares skip with a C++ default of true; C callers pass it. */
#ifdef __cplusplus
TVM_DLL void VTASynchronize(VTACommandHandle cmd, uint32_t wait_cycles, bool skip = true);
#else
TVM_DLL void VTASynchronize(VTACommandHandle cmd, uint32_t wait_cycles, bool skip);
#endif

#ifdef __cplusplus
}
#endif
#endif /* VTATUNE_VTA_RUNTIME_H_ */

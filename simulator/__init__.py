"""The VTA machine: hardware configuration, ISA, programs, functional and timing engines.

Nothing here knows about schedules, templates or search: it runs any valid stream.
"""

from simulator.errors import ConfigError, DeadlockError, EncodingError, ProgramError, VTAError
from simulator.functional import FsimCounters, Machine, RunResult, count, execution_order, run
from simulator.hardware import DEFAULT, PRESETS, HardwareConfig
from simulator.isa import (
    AluInsn,
    AluOp,
    FinishInsn,
    GemmInsn,
    Instruction,
    MemId,
    MemInsn,
    Module,
    Opcode,
    Uop,
    decode_insn,
    decode_uop,
    encode_insn,
    encode_uop,
)
from simulator.jit import engines_to_compile
from simulator.program import DramTensor, Program

__all__ = [
    "AluInsn", "AluOp", "ConfigError", "DEFAULT", "DeadlockError", "DramTensor", "EncodingError",
    "FinishInsn", "FsimCounters", "GemmInsn", "HardwareConfig", "Instruction", "Machine",
    "MemId", "MemInsn", "Module", "Opcode", "PRESETS", "Program", "ProgramError", "RunResult",
    "Uop", "VTAError", "count", "decode_insn", "decode_uop", "encode_insn", "encode_uop",
    "engines_to_compile", "execution_order", "run",
]

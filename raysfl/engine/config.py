"""Engine section of a scenario: pools, clock, placement, backpressure, checkpoints."""

from __future__ import annotations

from dataclasses import dataclass

from raysfl.config import option


@dataclass(frozen=True)
class EngineConfig:
    """How the simulation is executed.

    With ``clock = "virtual"`` none of these change results beyond the last float bits (thread counts and
    the memory format pick other kernels; ``flush_denormal`` zeroes values below float32's normal range),
    except ``precision = "bfloat16"``, which computes the model's convolutions and matmuls with 8
    significant bits.
    """

    pools: int = option(1, ge=1, doc="number of ClientPool actors hosting the virtual clients")
    clients_per_pool: int = option(
        0, ge=0, doc="clients per pool; 0 = spread K clients evenly over `pools`; 1 = one actor per client"
    )
    placement: str = option(
        "least-loaded",
        choices=("blocks", "least-loaded"),
        doc="client -> pool: fixed blocks of clients; or, for methods whose client calls are whole jobs (the "
        "FL family), each call to the pool with the fewest calls in flight, the client's state travelling "
        "with it (same numbers; ray backend)",
    )
    clock: str = option(
        "virtual",
        choices=("virtual", "realtime"),
        doc="virtual = deterministic event time; realtime = paced to the wall clock (not deterministic)",
    )
    time_scale: float = option(
        1.0, ge=1e-6, doc="realtime mode: emulated seconds per wall second", applies={"clock": ("realtime",)}
    )
    max_inflight: int = option(32, ge=1, doc="bound on outstanding actor calls (object-store backpressure)")
    server_device: str = option("auto", choices=("auto", "cpu", "cuda"), doc="where the server model lives")
    torch_threads: int = option(
        1, ge=1, doc="torch threads per client pool; fixed so results do not depend on the host"
    )
    server_threads: int = option(
        2, ge=1, doc="torch threads of the server process (CPU server); fixed for the same reason"
    )
    memory_format: str = option(
        "contiguous",
        choices=("contiguous", "channels_last"),
        doc="layout of the model's conv weights, hence of its feature maps; channels_last runs oneDNN's "
        "faster convolutions (CPU, GPU): other float rounding, so other last bits than contiguous",
    )
    precision: str = option(
        "float32",
        choices=("float32", "bfloat16"),
        doc="bfloat16 = mixed precision: the model's layers run under torch.autocast to bfloat16 "
        "(convolutions and matmuls in bfloat16; float32 weights, gradients, optimizer state and layer "
        "outputs); other numbers than float32; faster only on CPUs with native bfloat16 (avx512_bf16, AMX) "
        "and on GPUs, and for wide layers (AlexNet, VGG; LeNet-5 runs slower)",
    )
    flush_denormal: bool = option(
        False,
        doc="flush subnormal floats (|x| < 1.2e-38) to zero in the thread that runs each client and server "
        "call (raysfl.engine.float_mode): x86 CPUs compute on subnormals several times slower, so a job "
        "whose values drift there runs at full speed; numbers change only where a subnormal value would "
        "have mattered (none did on the FedAvg peer and default scenarios); CPU only",
    )
    checkpoint_every: int = option(
        0, ge=0, doc="checkpoint every N global iterations to RUN_DIR/checkpoints (0 = off); see --resume"
    )
    keep_checkpoints: int = option(2, ge=1, doc="how many of the newest checkpoint files to keep")
    max_restarts: int = option(
        2, ge=0, doc="restarts after a worker dies: roll back to the last checkpoint (or the start)"
    )
    kill_pool_at_iteration: int = option(
        0, ge=0, doc="fault injection: SIGKILL client pool 0 once at this iteration (0 = never; ray)"
    )

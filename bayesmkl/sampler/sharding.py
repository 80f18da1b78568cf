"""The training points spread over several devices: the sweep's N axis sharded with jax.sharding.

Every sum over training points in a sweep — the landmark model's Ψᵀ Λ⁻¹ Ψ and Ψᵀ Λ⁻¹ T
(docs/math.md §16.2), the per-kernel decision values Φ, the collapsed kernel-weight target, the
pseudo-likelihood — is an ``einsum`` or a reduction over the N axis of arrays that carry it
(``K (P, N, M)``, the targets ``(C, N)``, λ ``(C, N)``). Placing those inputs on a
:class:`jax.sharding.Mesh` whose axis ``"rows"`` splits N is therefore all it takes: ``jit``
partitions the compiled sweep (XLA's GSPMD), each device holds and reduces its rows, and the
small (M + 1)-sized systems and the kernel weights are replicated. No process pool and no code
path of its own: the draws equal the unsharded ones to rounding (the reductions add in another
order), and per-point random draws are the same values (JAX's partitionable Threefry).

Devices are whatever JAX sees: several GPUs of one host, the devices of all hosts after
:func:`jax.distributed.initialize`, or CPU devices forced with
``XLA_FLAGS=--xla_force_host_platform_device_count=D`` (set before JAX is imported).

Usage (the user guide's "Many rows on several devices" has the whole recipe)::

    K, delta = shard_rows(K, delta)          # K (P, N, M) over every visible device
    runner = ChainRunner(BM3KL(adapt_sweeps=300), num_chains=4, num_samples=100)
    runner.run(jax.random.key(0), K, delta)  # the same program, partitioned by jit
"""

from __future__ import annotations

import jax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

__all__ = ["ROWS", "row_mesh", "shard_rows"]

#: Name of the mesh axis that splits the training points.
ROWS = "rows"


def row_mesh(devices=None) -> Mesh:
    """A one-axis :class:`~jax.sharding.Mesh` named :data:`ROWS` over ``devices`` (default: all
    devices JAX sees, of every host), with automatic sharding propagation (GSPMD)."""
    devices = list(jax.devices() if devices is None else devices)
    if not devices:
        raise ValueError("row_mesh needs at least one device")
    return jax.make_mesh(
        (len(devices),), (ROWS,), axis_types=(jax.sharding.AxisType.Auto,), devices=devices
    )


def shard_rows(K, targets, weight=None, margin=None, *, mesh: Mesh | None = None):
    """Place the sweep's inputs with their training-point axis split over ``mesh``.

    Parameters
    ----------
    K : array (P, N, M)
        Kernels between the N training points and the M landmarks (or the exact model's
        ``(P, N, N)``: its rows are sharded, its columns kept whole).
    targets : array (C, N)
        Signed targets (classifier) or standardised y (regressor, C = 1).
    weight : array (N,), optional
        Sample weights.
    margin : array (C, N), optional
        Margins (classifier).
    mesh : Mesh, optional
        Default :func:`row_mesh` over every visible device. N must be a multiple of the
        number of devices (``ValueError`` otherwise).

    Returns
    -------
    tuple
        ``(K, targets)``, followed by ``weight`` and ``margin`` when given, as sharded arrays to
        pass to :class:`~bayesmkl.sampler.runner.ChainRunner` or ``MCMC.run`` as they are.
    """
    mesh = row_mesh() if mesh is None else mesh
    n, d = int(K.shape[1]), int(mesh.shape[ROWS])
    if n % d:
        raise ValueError(
            f"{n} training points do not split evenly over {d} devices: use a number of points "
            f"that is a multiple of {d} (drop {n % d} or add {d - n % d}), or fewer devices"
        )

    def put(x, spec):
        return jax.device_put(x, NamedSharding(mesh, spec))

    out = [put(K, PartitionSpec(None, ROWS, None)), put(targets, PartitionSpec(None, ROWS))]
    if weight is not None:
        out.append(put(weight, PartitionSpec(ROWS)))
    if margin is not None:
        out.append(put(margin, PartitionSpec(None, ROWS)))
    return tuple(out)

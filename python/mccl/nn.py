"""Tensor-parallel linear layers and gradient averaging for torch, after
MLX's `mlx.nn.layers.distributed` and `mlx.nn.average_gradients`.

    import torch.distributed as dist
    import mccl, mccl.nn as mnn
    dist.init_process_group("mccl", init_method="env://")

    # Megatron-style MLP: the hidden layer is split over the ranks.
    up = mnn.shard_linear(torch.nn.Linear(512, 2048), "all-to-sharded")
    down = mnn.shard_linear(torch.nn.Linear(2048, 512), "sharded-to-all")
    y = down(torch.relu(up(x)))          # x and y replicated on every rank

    # Attention: a fused QKV projection is 3 blocks; each block is split on
    # its own, so every rank holds the q, k and v rows of its heads.
    qkv = mnn.shard_linear(attn.qkv, "all-to-sharded", segments=3)
    out = mnn.shard_linear(attn.out, "sharded-to-all")

    # Data parallel: average the gradients after backward, then step.
    loss.backward()
    grads = mnn.average_gradients({n: p.grad for n, p in model.named_parameters()})
    for n, p in model.named_parameters():
        p.grad = grads[n]
    optimizer.step()

From MLX to here:

- Groups. `group=` takes an `mccl.distributed` group (MLX's
  `mx.distributed.Group`: `md.init()`, `group.split(...)`) or a
  torch.distributed process group. `group=None` is the global group, as in
  MLX: torch's default process group when torch.distributed is initialized,
  else the group `md.init()` made. When neither exists, a process started
  alone is a group of one (a model sharded "over one rank" runs unsharded);
  a process of a launched job (WORLD_SIZE, MLX_RANK, ... say it has
  company) raises ValueError asking for `md.init()` first, never working
  silently on its own shard or gradients.
- Names follow torch: `AllToShardedLinear(in_features, out_features,
  bias=True, group=None, device=None, dtype=None)` where MLX has
  `(input_dims, output_dims, bias, group)`; `from_linear(linear,
  segments=1, group=None)` takes a `torch.nn.Linear`. `in_features` and
  `out_features` stay the full layer's sizes; `weight` and `bias` are this
  rank's shard.
- `AllToShardedLinear` (column parallel): each rank holds out_features/N
  rows of the weight and of the bias, takes the replicated input and returns
  its slice of the output. Its input's gradient is summed over the group in
  backward (`sum_gradients`), so a replicated input gets the whole gradient.
  No gather of the output, as in MLX.
- `ShardedToAllLinear` (row parallel): each rank holds in_features/N columns
  of the weight and the whole bias, takes its slice of the input's last
  dimension, and the partial products are summed with one all-reduce; the
  bias is added once, after the sum.
- Quantized layers: `QuantizedLinear`, `QuantizedAllToShardedLinear` and
  `QuantizedShardedToAllLinear` keep int8 weights with one float scale per
  output row (symmetric: w ~ q * scale, q in [-127, 127]) where MLX has
  group-wise `group_size`/`bits` quantization. The forward dequantizes and
  runs a float matmul. As in MLX their parameters are frozen: weight,
  scales and bias are buffers, in the state dict but not in parameters().
  `from_linear` takes a float `torch.nn.Linear` (quantized whole, then
  split, so the shards equal the unsharded `QuantizedLinear`'s) or a
  `QuantizedLinear`.
- `shard_linear(module, sharding, *, segments=1, group=None)` returns a new
  sharded layer for a `torch.nn.Linear` or a `QuantizedLinear`; the
  original is left alone.
- `shard_inplace(module, sharding, *, segments=1, group=None)` takes a
  `torch.nn.Linear`: the module stays the same object of the same class,
  where its parent and optimizers expect it, its weight and bias become this
  rank's shard, and its forward is replaced by the sharded layer's, so it
  communicates. (MLX's shard_inplace only replaces parameters and leaves the
  communication to modules that do it themselves; a torch Linear does not.)
- `sum_gradients(group=None)` returns f(x): identity forward, all-reduce
  (sum) of the gradient in backward.
- `average_gradients(grads, group=None, all_reduce_size=32 MiB,
  communication_type=None)` averages a nested dict/list/tuple of tensors
  (None entries kept). Tensors are flattened into buckets of one dtype of at
  most `all_reduce_size` bytes on the wire (a larger tensor travels alone;
  <= 0: one all-reduce per tensor); where MLX falls back to one all-reduce
  per tensor when dtypes are mixed, here each dtype gets its own buckets.
  `communication_type` (e.g. torch.bfloat16) is the dtype on the wire; the
  result keeps each tensor's dtype. Integer leaves are summed exactly in
  their own dtype and divided truncating toward zero (mccl's integer avg);
  bool leaves are refused by name. The input is not modified; with one
  rank it is returned as is.

Not here: MLX's uneven splits (`sizes=`), fractional segments, callable
sharding predicates, `communication_stream`, `FullyShardedModule`. Sizes
must split evenly: out_features (all-to-sharded) or in_features
(sharded-to-all) a multiple of group size * segments, else ValueError.

Layers built by their constructors draw their own shard at random (the
nn.Linear distribution of the full layer); a sharded-to-all bias is
replicated, so seed every rank alike, or build from a full layer with
from_linear / shard_linear.
"""

import math
import types

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from . import distributed as md

__all__ = [
    "AllToShardedLinear", "ShardedToAllLinear", "QuantizedLinear", "QuantizedAllToShardedLinear",
    "QuantizedShardedToAllLinear", "shard_linear", "shard_inplace", "sum_gradients", "average_gradients",
]

ALL_TO_SHARDED = "all-to-sharded"
SHARDED_TO_ALL = "sharded-to-all"
# The setting that must split over the ranks, and the weight dimension it is.
_SPLIT = {ALL_TO_SHARDED: ("out_features", 0), SHARDED_TO_ALL: ("in_features", 1)}


# Communication. Everything below talks to a group through these two, so
# another kind of group needs changes here only.

def _global_group():
    """What group=None means: torch's default process group (returned as
    None, which torch.distributed reads so), else md.init()'s group, else
    a group of one for a process started alone. A process that the
    launcher's environment gives company but that made no group raises:
    working on its own would train or shard wrong without a word."""
    if dist.is_available() and dist.is_initialized():
        return None
    world = md.world()
    if world is not None:
        return world
    size = md.launched_world_size()
    if size == 1:
        return _ALONE
    raise ValueError(
        f"mccl.nn: group=None means the global group, but this process is one of "
        f"{size if size else 'several'} ranks ({md._launcher_variables()}) and neither "
        "mccl.distributed.init() nor torch.distributed.init_process_group() has run: call "
        "md.init() first (or pass group=)")


class _Alone:
    """The group of one of a process started alone."""


_ALONE = _Alone()


def _resolve(group):
    return _global_group() if group is None else group


def _group_size_rank(group):
    """(size, this rank) of `group`: an mccl.distributed group, a
    torch.distributed process group, or None for the global group."""
    group = _resolve(group)
    if isinstance(group, md.Group):
        return group.size(), group.rank()
    if group is _ALONE:
        return 1, 0
    return dist.get_world_size(group), dist.get_rank(group)


def _all_reduce_sum(tensor, group):
    """Sums `tensor` over `group` in place and returns it."""
    group = _resolve(group)
    if isinstance(group, md.Group):
        return tensor.copy_(md.all_sum(tensor, group=group))
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
    return tensor


class _SumGradients(torch.autograd.Function):
    """Identity; the backward sums the gradient over the group, since every
    rank's shard used the same replicated input."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        # A private contiguous copy: the incoming gradient may be shared or
        # expanded (stride 0), and the all-reduce writes in place.
        return _all_reduce_sum(grad.clone(memory_format=torch.contiguous_format), ctx.group), None


class _AllSum(torch.autograd.Function):
    """Sum over the group. Every rank's result, and so its gradient, is the
    same, so each partial sum's gradient is the result's gradient."""

    @staticmethod
    def forward(ctx, x, group):
        return _all_reduce_sum(x.clone(memory_format=torch.contiguous_format), group)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def sum_gradients(group=None):
    """f(x): x in the forward; in the backward, x's gradient summed over
    `group`. Put it where a replicated tensor enters rank-specific work."""
    if _group_size_rank(group)[0] == 1:
        return lambda x: x
    return lambda x: _SumGradients.apply(x, group)


def _all_sum(x, group):
    return x if _group_size_rank(group)[0] == 1 else _AllSum.apply(x, group)


# Sharding.

def _check_sharding(sharding):
    if sharding not in _SPLIT:
        raise ValueError(f"mccl.nn: sharding={sharding!r}: expected {ALL_TO_SHARDED!r} or {SHARDED_TO_ALL!r}")


def _check_split(setting, features, segments, group):
    if not isinstance(segments, int) or isinstance(segments, bool) or segments < 1:
        raise ValueError(f"mccl.nn: segments={segments!r}: expected a positive int")
    size = _group_size_rank(group)[0]
    if features % (size * segments):
        raise ValueError(f"mccl.nn: {setting}={features} does not split over {size} rank(s) x "
                         f"segments={segments}: it must be a multiple of {size * segments}")


def _check_module(module, kinds, what):
    if not isinstance(module, kinds):
        names = " or ".join(f"{'torch.nn' if k is nn.Linear else 'mccl.nn'}.{k.__name__}" for k in kinds)
        raise ValueError(f"mccl.nn: {what} takes a {names}, got {type(module).__name__}")


def _shard(tensor, dim, segments, group):
    """This rank's part of `tensor` along `dim`. The tensor is `segments`
    equal blocks (a fused QKV weight is 3), each split over the ranks on its
    own, so the rank holds its slice of every block, in block order."""
    size, rank = _group_size_rank(group)
    blocks = tensor.detach().chunk(segments, dim)
    return torch.cat([block.chunk(size, dim)[rank] for block in blocks], dim)


def _shard_params(sharding, weight, per_row, segments, group):
    """(weight shard, [shards of the per-output-row tensors]). A row split
    takes the rows' entries of the bias and scales with it; a column split
    leaves them whole: the bias is added once after the sum, and each scale
    belongs to a whole row."""
    setting, dim = _SPLIT[sharding]
    _check_split(setting, weight.shape[dim], segments, group)
    if dim == 0:
        per_row = [None if t is None else _shard(t, 0, segments, group) for t in per_row]
    else:
        per_row = [None if t is None else t.detach().clone() for t in per_row]
    return _shard(weight, dim, segments, group), per_row


def _shard_shapes(sharding, in_features, out_features, group):
    """(weight shape, bias shape) of one rank's shard."""
    setting, dim = _SPLIT[sharding]
    _check_split(setting, out_features if dim == 0 else in_features, 1, group)
    size = _group_size_rank(group)[0]
    if dim == 0:
        return (out_features // size, in_features), (out_features // size,)
    return (out_features, in_features // size), (out_features,)


def _uniform(shape, in_features, device, dtype):
    """nn.Linear's initial distribution for a layer of `in_features`
    inputs, whatever part of it `shape` is."""
    bound = 1 / math.sqrt(in_features) if in_features > 0 else 0
    return torch.empty(shape, device=device, dtype=dtype).uniform_(-bound, bound)


def _all_to_sharded_linear(x, weight, bias, group):
    return F.linear(sum_gradients(group)(x), weight, bias)


def _sharded_to_all_linear(x, weight, bias, group):
    y = _all_sum(F.linear(x, weight), group)
    # The bias after the sum: added once, not once per rank.
    return y if bias is None else y + bias


def _extra_repr(layer):
    sharding = "" if layer.sharding is None else f", sharding={layer.sharding}"
    return (f"in_features={layer.in_features}, out_features={layer.out_features}, "
            f"bias={layer.bias is not None}{sharding}")


# Float layers.

class _ShardedLinear(nn.Module):
    sharding = None  # set by each subclass

    def __init__(self, in_features, out_features, bias=True, group=None, device=None, dtype=None):
        super().__init__()
        weight_shape, bias_shape = _shard_shapes(self.sharding, in_features, out_features, group)
        self.in_features, self.out_features, self.group = in_features, out_features, group
        self.weight = nn.Parameter(_uniform(weight_shape, in_features, device, dtype))
        self.register_parameter("bias", nn.Parameter(_uniform(bias_shape, in_features, device, dtype))
                                if bias else None)

    @classmethod
    def from_linear(cls, linear, segments=1, group=None):
        """This rank's shard of `linear` (a torch.nn.Linear); `segments`:
        the number of fused blocks its weight is made of."""
        _check_module(linear, (nn.Linear,), f"{cls.__name__}.from_linear")
        weight, (bias,) = _shard_params(cls.sharding, linear.weight, [linear.bias], segments, group)
        layer = cls(linear.in_features, linear.out_features, bias is not None, group,
                    weight.device, weight.dtype)
        layer.weight = nn.Parameter(weight, requires_grad=linear.weight.requires_grad)
        if bias is not None:
            layer.bias = nn.Parameter(bias, requires_grad=linear.bias.requires_grad)
        return layer

    extra_repr = _extra_repr


class AllToShardedLinear(_ShardedLinear):
    """Column-parallel linear: replicated input, this rank's out_features/N
    outputs. The input's gradient is summed over the group."""
    sharding = ALL_TO_SHARDED

    def forward(self, x):
        return _all_to_sharded_linear(x, self.weight, self.bias, self.group)


class ShardedToAllLinear(_ShardedLinear):
    """Row-parallel linear: this rank's in_features/N slice of the input's
    last dimension in, the full output (summed over the group) out."""
    sharding = SHARDED_TO_ALL

    def forward(self, x):
        return _sharded_to_all_linear(x, self.weight, self.bias, self.group)


# int8 weight-quantized layers.

def _quantize(weight):
    """Symmetric int8 per output row: weight ~ q * scales[:, None]."""
    weight = weight.detach()
    scales = weight.abs().amax(dim=1) / 127
    # An all-zero row quantizes to zeros whatever its scale; 1 avoids 0/0.
    scales = torch.where(scales > 0, scales, torch.ones_like(scales))
    q = torch.round(weight / scales[:, None]).clamp_(-127, 127).to(torch.int8)
    return q, scales


class _Int8Linear(nn.Module):
    """int8 weight, a float scale per weight row and a float bias, all
    buffers: frozen, as MLX's quantized layers."""
    sharding = None  # unsharded unless a subclass says

    def __init__(self, in_features, out_features, weight, bias, group):
        super().__init__()
        self.in_features, self.out_features, self.group = in_features, out_features, group
        q, scales = _quantize(weight)
        self.register_buffer("weight", q)
        self.register_buffer("scales", scales)
        self.register_buffer("bias", bias)

    def dequantized_weight(self):
        """The float weight (this rank's shard) that the forward uses."""
        return self.weight.to(self.scales.dtype) * self.scales[:, None]

    extra_repr = _extra_repr


class QuantizedLinear(_Int8Linear):
    """Unsharded int8 linear layer, MLX's nn.QuantizedLinear for this
    module's quantization; shard_linear splits it."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        weight = _uniform((out_features, in_features), in_features, device, dtype)
        bias = torch.zeros(out_features, device=device, dtype=dtype) if bias else None
        super().__init__(in_features, out_features, weight, bias, None)

    @classmethod
    def from_linear(cls, linear):
        """`linear` (a torch.nn.Linear) quantized."""
        _check_module(linear, (nn.Linear,), "QuantizedLinear.from_linear")
        layer = cls(linear.in_features, linear.out_features, linear.bias is not None,
                    linear.weight.device, linear.weight.dtype)
        layer.weight, layer.scales = _quantize(linear.weight)
        if linear.bias is not None:
            layer.bias = linear.bias.detach().clone()
        return layer

    def forward(self, x):
        return F.linear(x, self.dequantized_weight(), self.bias)


class _QuantizedShardedLinear(_Int8Linear):
    def __init__(self, in_features, out_features, bias=True, group=None, device=None, dtype=None):
        weight_shape, bias_shape = _shard_shapes(self.sharding, in_features, out_features, group)
        weight = _uniform(weight_shape, in_features, device, dtype)
        bias = torch.zeros(bias_shape, device=device, dtype=dtype) if bias else None
        super().__init__(in_features, out_features, weight, bias, group)

    @classmethod
    def from_linear(cls, linear, segments=1, group=None):
        """This rank's shard of `linear`: a torch.nn.Linear (quantized whole
        first, so every row keeps its full-row scale) or a QuantizedLinear."""
        _check_module(linear, (nn.Linear, QuantizedLinear), f"{cls.__name__}.from_linear")
        if isinstance(linear, nn.Linear):
            linear = QuantizedLinear.from_linear(linear)
        q, (scales, bias) = _shard_params(cls.sharding, linear.weight, [linear.scales, linear.bias],
                                          segments, group)
        layer = cls(linear.in_features, linear.out_features, bias is not None, group,
                    scales.device, scales.dtype)
        layer.weight, layer.scales, layer.bias = q, scales, bias
        return layer


class QuantizedAllToShardedLinear(_QuantizedShardedLinear):
    """AllToShardedLinear with an int8 weight."""
    sharding = ALL_TO_SHARDED

    def forward(self, x):
        return _all_to_sharded_linear(x, self.dequantized_weight(), self.bias, self.group)


class QuantizedShardedToAllLinear(_QuantizedShardedLinear):
    """ShardedToAllLinear with an int8 weight."""
    sharding = SHARDED_TO_ALL

    def forward(self, x):
        return _sharded_to_all_linear(x, self.dequantized_weight(), self.bias, self.group)


_LAYERS = {
    (ALL_TO_SHARDED, False): AllToShardedLinear, (SHARDED_TO_ALL, False): ShardedToAllLinear,
    (ALL_TO_SHARDED, True): QuantizedAllToShardedLinear, (SHARDED_TO_ALL, True): QuantizedShardedToAllLinear,
}


def shard_linear(module, sharding, *, segments=1, group=None):
    """A new layer holding this rank's shard of `module` (a torch.nn.Linear
    or a QuantizedLinear) that communicates as `sharding` says:
    "all-to-sharded" or "sharded-to-all". `module` is left alone."""
    _check_sharding(sharding)
    _check_module(module, (nn.Linear, QuantizedLinear), "shard_linear")
    return _LAYERS[sharding, isinstance(module, QuantizedLinear)].from_linear(module, segments, group)


def shard_inplace(module, sharding, *, segments=1, group=None):
    """Shards the torch.nn.Linear `module` itself: its weight and bias become
    this rank's shard (new Parameters: build optimizers afterwards) and its
    forward becomes the sharded layer's, communication included. It stays a
    torch.nn.Linear where it is; in_features/out_features keep the full
    layer's sizes."""
    _check_sharding(sharding)
    _check_module(module, (nn.Linear,), "shard_inplace")
    weight, (bias,) = _shard_params(sharding, module.weight, [module.bias], segments, group)
    module.weight = nn.Parameter(weight, requires_grad=module.weight.requires_grad)
    if bias is not None:
        module.bias = nn.Parameter(bias, requires_grad=module.bias.requires_grad)
    module.group = group
    # The sharded layer's forward, bound to this module (a bound method, so
    # a deepcopy of the module calls its own copy).
    module.forward = types.MethodType(_LAYERS[sharding, False].forward, module)
    return module


# Gradient averaging.

def _leaves(tree):
    if isinstance(tree, dict):
        for value in tree.values():
            yield from _leaves(value)
    elif isinstance(tree, (list, tuple)):
        for value in tree:
            yield from _leaves(value)
    else:
        yield tree


def _rebuild(tree, leaves):
    """`tree`'s structure with its leaves taken in order from `leaves`."""
    if isinstance(tree, dict):
        return {key: _rebuild(value, leaves) for key, value in tree.items()}
    if isinstance(tree, list):
        return [_rebuild(value, leaves) for value in tree]
    if isinstance(tree, tuple):
        return tuple(_rebuild(value, leaves) for value in tree)
    return next(leaves)


def _buckets(tensors, limit, wire_dtype):
    """Indices into `tensors` (None entries skipped), one list per
    all-reduce: tensors of one dtype, in order, while the bucket stays
    within `limit` bytes on the wire; a larger tensor travels alone."""
    by_dtype = {}
    for i, t in enumerate(tensors):
        if t is not None:
            by_dtype.setdefault(t.dtype, []).append(i)
    buckets = []
    for dtype, indices in by_dtype.items():
        itemsize = torch.empty((), dtype=wire_dtype or dtype).element_size()
        bucket, used = [], 0
        for i in indices:
            nbytes = tensors[i].numel() * itemsize
            if bucket and used + nbytes > limit:
                buckets.append(bucket)
                bucket, used = [], 0
            bucket.append(i)
            used += nbytes
        buckets.append(bucket)
    return buckets


def average_gradients(grads, group=None, all_reduce_size=32 * 1024**2, communication_type=None):
    """`grads` (tensors in dicts, lists and tuples, None allowed) averaged
    over `group`, in the same structure. One all-reduce per bucket of
    tensors of one dtype, at most `all_reduce_size` bytes on the wire (<= 0:
    one per tensor); `communication_type`: the floating dtype sent (None:
    each tensor's own). New tensors; `grads` is not modified, and is
    returned as is on a group of one."""
    if communication_type is not None and not (isinstance(communication_type, torch.dtype)
                                               and communication_type.is_floating_point):
        raise ValueError(f"mccl.nn: communication_type={communication_type!r}: "
                         "expected None or a floating torch dtype")
    group = _resolve(group)
    size = _group_size_rank(group)[0]
    tensors = list(_leaves(grads))
    for t in tensors:
        if t is not None and not isinstance(t, torch.Tensor):
            raise TypeError(f"mccl.nn: average_gradients takes tensors and None in dicts, lists and "
                            f"tuples, got {type(t).__name__}")
        if t is not None and t.dtype == torch.bool:
            raise TypeError("mccl.nn: average_gradients: a torch.bool leaf has no average; "
                            "leave it out of the gradients")
    if size == 1:
        return grads
    averaged = list(tensors)
    with torch.no_grad():
        for bucket in _buckets(tensors, all_reduce_size, communication_type):
            flat = torch.cat([tensors[i].reshape(-1) for i in bucket])
            if flat.is_floating_point() or flat.is_complex():
                wire = flat if communication_type is None else flat.to(communication_type)
                flat = _all_reduce_sum(wire, group).to(flat.dtype).div_(size)
            else:  # exact integer sum, then mccl's integer avg: truncate toward zero
                flat = torch.div(_all_reduce_sum(flat, group), size, rounding_mode="trunc")
            parts = flat.split([tensors[i].numel() for i in bucket])
            for i, part in zip(bucket, parts):
                averaged[i] = part.view(tensors[i].shape)
    return _rebuild(grads, iter(averaged))

"""CUDA parameters without host copies: each gradient goes device-to-host once, straight into
its slice of the session's gradient arena, and the new weights come back host-to-device once,
straight from the runtime's weights buffer.

Gradients. As backward finishes a gradient (the optimizer's hook) or in step() for the rest,
its layout entry is announced to the session (begin_fill) and the gradient joins a bucket; a
bucket of at least BUCKET_BYTES is launched on a copy stream that first waits for the current
stream: the per-tensor L2 norms in float64 (the finiteness and the sum of squares the kit's
clipping and found_inf need, computed where the gradient lives), then one copy per tensor into
the pinned arena, then an event. Finished buckets are handed to the session (end_fill with each
tensor's sum of squares) as later hooks find their events done, and all of them before the step.
The gradient tensors are held until their copies are done.

Weights. The session calls on_weights(begin, n) as each subgroup's new weights reach its
buffer (during the step, from the runtime's workers): the range goes host-to-device on a second
stream into a flat GPU buffer of the model (the store's element order). Only when the step has
committed are the parameters written, from that buffer, device to device: a step that is
skipped or fails leaves them as they were.

Both host buffers are page-locked in place (cudaHostRegister) so that the copies are
asynchronous DMA; where that fails the copies still work, synchronously.
"""
import warnings

import torch

# Gradient bytes per launched bucket (the copy stream's launches, one event each).
BUCKET_BYTES = 32 << 20


def _register(array):
    """Page-locks a numpy array's memory for CUDA; returns its address, or None (warned) when
    the driver refuses."""
    ptr, nbytes = array.ctypes.data, array.nbytes
    rc = int(torch.cuda.cudart().cudaHostRegister(ptr, nbytes, 0))
    if rc != 0:
        warnings.warn("csdkit: cudaHostRegister of {} bytes at {:#x} failed (cudaError {}): the "
                      "copies between the GPU and this host buffer will be synchronous"
                      .format(nbytes, ptr, rc), RuntimeWarning, stacklevel=3)
        return None
    return ptr


def _unregister(ptrs, device):
    """Waits for the device's copies, then unpins what _register pinned (None: nothing)."""
    torch.cuda.synchronize(device)
    for ptr in ptrs:
        if ptr is not None:
            torch.cuda.cudart().cudaHostUnregister(ptr)


def _norms(tensors):
    """Each tensor's L2 norm in float64, on the tensors' device: one value per tensor that does
    not depend on the other tensors of the list (torch._foreach_norm's per-tensor reduction;
    per-tensor vector_norm where there is no float64 foreach norm)."""
    try:
        return torch._foreach_norm(tensors, 2, dtype=torch.float64)
    except (TypeError, RuntimeError, AttributeError):
        return [torch.linalg.vector_norm(t, 2, dtype=torch.float64) for t in tensors]


class CudaArena:
    """The CUDA side of one optimizer's session (all its parameters on one CUDA device)."""

    def __init__(self, session, params, offsets, device):
        self.session = session
        self.device = device
        self.params = params                   # local parameter tensors, layout order
        self.offsets = offsets                 # each entry's first element in store order
        self.dtype = params[0].dtype           # the store's grad and out dtype (the params')
        self.esize = params[0].element_size()
        self._arena_np = session.grad_arena()  # keeps the session alive: dropped by close()
        self.arena = torch.from_numpy(self._arena_np).view(self.dtype)
        self._pinned = [_register(self._arena_np)]
        self.total = self.arena.numel()
        self.copy_stream = torch.cuda.Stream(device)
        self.h2d_stream = torch.cuda.Stream(device)
        self.shadow = torch.empty(self.total, dtype=self.dtype, device=device)
        self._weights_np = None
        self.weights = None                    # the runtime's weights buffer, as a tensor
        self._weights_pinned = False
        self._pin_weights()
        self._pending = []                     # [(t, grad)] not launched yet
        self._pending_bytes = 0
        self._inflight = []                    # [(event, [(t, grad)], host norms)] in order
        self._queued = set()                   # entries of the pending bucket
        self._begun = set()                    # entries begun (copying), not ended yet
        # Each entry's slice of the arena; the norms' page-locked landing slots (reused from
        # the first slot at each step).
        self._views = [self.arena[o:o + p.numel()] for o, p in zip(offsets, params)]
        self._host_norms = torch.empty(2 * len(params), dtype=torch.float64, pin_memory=True)
        self._slot = 0
        self._norm_gpu = {}                    # entry -> float64 norm of its last copy (GPU)
        self._weights_done = None              # event: the last weights_in's copies read shadow
        self.bytes_sent = 0                    # host-to-device bytes of this step's weights

    # -- gradients ------------------------------------------------------------------------

    def queue(self, t, g):
        """Layout entry t's gradient `g` (contiguous, the parameter's dtype and shape) is to go
        into the arena, with its bucket: announced to the session (begin_fill: a speculation
        that sent t's slice is abandoned first) when the bucket is launched."""
        if t in self._queued or t in self._begun:
            self.finish()  # its earlier copy ends first (the session takes one at a time)
        self._queued.add(t)
        self._pending.append((t, g))
        self._pending_bytes += g.numel() * self.esize
        if self._pending_bytes >= BUCKET_BYTES:
            self._launch()
            self.poll()

    def _launch(self):
        if not self._pending:
            return
        bucket, self._pending, self._pending_bytes = self._pending, [], 0
        ts = [t for t, _ in bucket]
        self._queued.clear()
        self.session.begin_fills(ts)
        self._begun.update(ts)
        if self._slot + len(bucket) > self._host_norms.numel():
            self.finish()  # (every slot of the step in use: wait for the buckets in flight)
            self._slot = 0
        host = self._host_norms[self._slot:self._slot + len(bucket)]
        self._slot += len(bucket)
        cs = self.copy_stream
        cs.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(cs):
            grads = [g.reshape(-1) for _, g in bucket]
            norms = torch.stack(_norms(grads))
            host.copy_(norms, non_blocking=True)
            views = self._views
            for t, g in zip(ts, grads):
                views[t].copy_(g, non_blocking=True)
            ev = torch.cuda.Event()
            ev.record(cs)
        self._inflight.append((ev, bucket, host, norms))
        for i, t in enumerate(ts):
            self._norm_gpu[t] = norms[i]

    def _end(self, item):
        _, bucket, host, _ = item
        ts = [t for t, _ in bucket]
        self.session.end_fills(ts, [s * s for s in host.tolist()])
        self._begun.difference_update(ts)

    def poll(self):
        """Hands the buckets whose copies are done to the session (without waiting)."""
        while self._inflight and self._inflight[0][0].query():
            self._end(self._inflight.pop(0))

    def finish(self):
        """Launches what is pending and hands every bucket to the session, waiting for them."""
        self._launch()
        while self._inflight:
            item = self._inflight.pop(0)
            item[0].synchronize()
            self._end(item)

    def changed(self, entries, grads):
        """Of `entries` (handed to the session, their gradients `grads` now), those whose
        gradient is no longer what was copied: its float64 L2 norm now differs in any bit from
        the one computed with the copy (a change in place that bumped no version counter,
        e.g. through .data). One pass over them on the GPU and one synchronization. A change
        that keeps every norm bit (a sign flip) is not seen."""
        if not entries:
            return []
        now = torch.stack(_norms([g.reshape(-1) for g in grads]))
        then = torch.stack([self._norm_gpu[t] for t in entries])
        diff = (now.view(torch.int64) != then.view(torch.int64)).nonzero().flatten().tolist()
        return [entries[i] for i in diff]

    def abort(self):
        """After an error: waits for what is in flight and leaves every announced entry
        without a fill (the session's end_fill with None)."""
        self._pending, self._pending_bytes = [], 0
        self._queued.clear()
        for ev, bucket, _, _ in self._inflight:
            ev.synchronize()
        self._inflight = []
        for t in list(self._begun):
            self.session.end_fill(t, None)
        self._begun.clear()
        self._norm_gpu.clear()
        self._slot = 0

    # -- weights --------------------------------------------------------------------------

    def _pin_weights(self):
        """The runtime's weights buffer as a tensor, page-locked, once it exists (a store with
        a low-precision copy: from the start; float32 weights: after the first step). In this
        thread: a worker thread's cudaHostRegister was refused on the GPU machine."""
        if self._weights_pinned:
            return
        buf = self.session.weights_buffer()
        if buf is None:
            return
        self._weights_np = buf
        self.weights = torch.from_numpy(buf).view(self.dtype)
        self._pinned.append(_register(buf))
        self._weights_pinned = True

    def before_step(self):
        """Called before the session's step: the weights copies of this step into the GPU
        buffer wait for the last step's reads of it."""
        self._pin_weights()
        if self._weights_done is not None:
            self.h2d_stream.wait_event(self._weights_done)
        self.bytes_sent = 0

    def on_weights(self, begin, n):
        """The session's weights hook (a runtime worker, with the GIL): elements [begin, begin
        + n) of the new weights are in the runtime's buffer; copied host-to-device now."""
        if self.weights is None:  # (float32 weights, first step: not page-locked yet)
            self._weights_np = self.session.weights_buffer()
            self.weights = torch.from_numpy(self._weights_np).view(self.dtype)
        with torch.cuda.stream(self.h2d_stream):
            self.shadow[begin:begin + n].copy_(self.weights[begin:begin + n], non_blocking=True)
        self.bytes_sent += n * self.esize

    def weights_in(self, entries):
        """After a committed step: the parameters of `entries` (layout entries with a gradient)
        take their new weights from the GPU buffer, device to device, in stream order."""
        cur = torch.cuda.current_stream(self.device)
        cur.wait_stream(self.h2d_stream)
        dst = [self.params[t].view(-1) for t in entries]
        src = [self.shadow[self.offsets[t]:self.offsets[t] + self.params[t].numel()]
               for t in entries]
        if dst:
            if hasattr(torch, "_foreach_copy_"):
                torch._foreach_copy_(dst, src)
            else:
                for d, s in zip(dst, src):
                    d.copy_(s)
        self._weights_done = torch.cuda.Event()
        self._weights_done.record(cur)

    def close(self):
        """Waits for the copies, unpins the host buffers and drops the views (the session may
        then be closed)."""
        try:
            self.abort()
        except Exception:  # pylint: disable=broad-except
            pass  # (closing after an error: nothing more to hand back)
        _unregister(self._pinned, self.device)
        self._pinned = []
        self.arena = self.weights = self._arena_np = self._weights_np = None
        self.shadow = None
        self.session = None

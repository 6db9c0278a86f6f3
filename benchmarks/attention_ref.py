"""The float64 attention every attention check compares with: benchmarks and tests alike."""
import torch


def attention_reference(q, k, v, scale, causal=False, window_left=-1, window_right=-1, softcap=0.0):
    """float64 attention of (B, N, H, D) tensors with GQA, bottom-right causal / windows and
    softcap: (out (B, N, H, D), lse (B, H, N), sum_j P_j |v_j| (B, N, H, D)). A row with no
    key gets out 0 and lse +inf."""
    n_q, n_k, group = q.shape[1], k.shape[1], q.shape[2] // k.shape[2]
    qd, kd, vd = (t.double().transpose(1, 2) for t in (q, k, v))
    kd, vd = kd.repeat_interleave(group, 1), vd.repeat_interleave(group, 1)
    s = qd @ kd.transpose(-1, -2) * scale
    if softcap > 0:
        s = torch.tanh(s / softcap) * softcap
    i = torch.arange(n_q, device=q.device)[:, None] + (n_k - n_q)
    j = torch.arange(n_k, device=q.device)[None, :]
    keep = torch.ones(n_q, n_k, dtype=torch.bool, device=q.device)
    window_right = 0 if causal else window_right
    if window_right >= 0:
        keep &= j <= i + window_right
    if window_left >= 0:
        keep &= j >= i - window_left
    s = s.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - lse[..., None]).nan_to_num(0.0)
    return (p @ vd).transpose(1, 2), lse.masked_fill(torch.isneginf(lse), float("inf")), \
        (p @ vd.abs()).transpose(1, 2)

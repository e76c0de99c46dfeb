"""tatp22/linformer-pytorch, linformer_pytorch/linformer_pytorch.py, at db142bf (the fix applied).

A causal Linformer head fills the masked scores with -1e10 in place; in float16 (mixed precision)
masked_fill_ raises "value cannot be converted to type at::Half without overflow". The fix
(db142bf, PR #19) fills with float('-inf'). Cut down to gen_causal_mask, get_EF (learnable),
LinearAttentionHead and a multi-head wrapper as MHAttention builds it (no checkpointing, no
decoder mode).
"""
import torch
import torch.nn as nn


def gen_causal_mask(input_size, dim_k, full_attention=False):
    if full_attention:
        return (torch.triu(torch.ones(input_size, input_size))==1).transpose(0,1)
    return (torch.triu(torch.ones(dim_k, input_size))==1).transpose(0,1)


def get_EF(input_size, dim, bias=True):
    lin = nn.Linear(input_size, dim, bias)
    torch.nn.init.xavier_normal_(lin.weight)
    return lin


class LinearAttentionHead(nn.Module):
    def __init__(self, dim, dropout, E_proj, F_proj, causal_mask, full_attention=False):
        super(LinearAttentionHead, self).__init__()
        self.E = E_proj
        self.F = F_proj
        self.dim = dim
        self.dropout = nn.Dropout(dropout)
        self.P_bar = None
        self.full_attention = full_attention
        self.causal_mask = causal_mask
        self.is_proj_tensor = isinstance(E_proj, torch.Tensor)

    def forward(self, Q, K, V, **kwargs):
        K = K.transpose(1,2)
        if not self.full_attention:
            if self.is_proj_tensor:
                K = torch.matmul(K, self.E)
            else:
                K = self.E(K)
        Q = torch.matmul(Q, K)

        P_bar = Q/torch.sqrt(torch.tensor(self.dim).type(Q.type()))
        if self.causal_mask is not None:
            self.causal_mask = self.causal_mask.to(Q.device)
            P_bar = P_bar.masked_fill_(~self.causal_mask, float('-inf'))  # FIX
        P_bar = P_bar.softmax(dim=-1)

        P_bar = self.dropout(P_bar)

        if not self.full_attention:
            V = V.transpose(1,2)
            if self.is_proj_tensor:
                V = torch.matmul(V, self.F)
            else:
                V = self.F(V)
            V = V.transpose(1,2)
        out_tensor = torch.matmul(P_bar, V)

        return out_tensor


class MHAttention(nn.Module):
    def __init__(self, input_size, dim, channels, dim_k, nhead, dropout, causal_mask):
        super(MHAttention, self).__init__()
        self.heads = nn.ModuleList()
        self.to_q = nn.ModuleList()
        self.to_k = nn.ModuleList()
        self.to_v = nn.ModuleList()
        E_proj = get_EF(input_size, dim_k)
        F_proj = E_proj
        for _ in range(nhead):
            self.heads.append(LinearAttentionHead(dim, dropout, E_proj, F_proj, causal_mask))
            self.to_q.append(nn.Linear(channels, dim, bias=False))
            self.to_k.append(nn.Linear(channels, dim, bias=False))
            self.to_v.append(nn.Linear(channels, dim, bias=False))
        self.w_o = nn.Linear(dim*nhead, channels)

    def forward(self, tensor, **kwargs):
        head_outputs = []
        for index, head in enumerate(self.heads):
            Q = self.to_q[index](tensor)
            K = self.to_k[index](tensor)
            V = self.to_v[index](tensor)
            head_outputs.append(head(Q,K,V,**kwargs))
        out = torch.cat(head_outputs, dim=-1)
        return self.w_o(out)


def build(dtype="float16", device="cpu"):
    """A causal Linformer attention layer (seq 256 projected to k=64) in the model's dtype."""
    torch.manual_seed(0)
    input_size, channels, dim_k, nhead = 256, 64, 64, 4
    model = MHAttention(input_size, channels // nhead, channels, dim_k, nhead, 0.0,
                        gen_causal_mask(input_size, dim_k))
    model = model.to(device=device, dtype=getattr(torch, dtype)).eval()
    x = torch.randn(2, input_size, channels).to(device=device, dtype=getattr(torch, dtype))
    return model, (x,)

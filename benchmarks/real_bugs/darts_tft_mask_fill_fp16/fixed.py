"""unit8co/darts, darts/models/forecasting/tft_submodels.py (_ScaledDotProductAttention), at
6e1fdf236 (the fix applied).

Under PyTorch Lightning's precision="16-mixed" (CUDA autocast float16) torch.bmm returns float16
scores, and masked_fill(mask, -1e9) raises "value cannot be converted to type at::Half without
overflow" (issue #3081). The fix (6e1fdf236, PR #3087) fills with torch.finfo(attn.dtype).min
and builds the scaling tensor in attn's dtype and device. Cut down to the interpretable
multi-head attention of the TFT with its causal mask (MonteCarloDropout as plain Dropout).
"""
import torch
import torch.nn as nn


class _ScaledDotProductAttention(nn.Module):
    def __init__(self, dropout=None, scale: bool = True):
        super().__init__()
        if dropout is not None:
            self.dropout = nn.Dropout(p=dropout)
        else:
            self.dropout = dropout
        self.softmax = nn.Softmax(dim=2)
        self.scale = scale

    def forward(self, q, k, v, mask=None):
        attn = torch.bmm(q, k.permute(0, 2, 1))

        if self.scale:
            dimension = torch.sqrt(  # FIX
                torch.tensor(k.shape[-1], dtype=attn.dtype, device=attn.device)  # FIX
            )  # FIX
            attn = attn / dimension

        if mask is not None:
            attn = attn.masked_fill(mask, torch.finfo(attn.dtype).min)  # FIX
        attn = self.softmax(attn)

        if self.dropout is not None:
            attn = self.dropout(attn)
        output = torch.bmm(attn, v)
        return output, attn


class _InterpretableMultiHeadAttention(nn.Module):
    def __init__(self, n_head: int, d_model: int, dropout: float = 0.0):
        super().__init__()

        self.n_head = n_head
        self.d_model = d_model
        self.d_k = self.d_q = self.d_v = d_model // n_head
        self.dropout = nn.Dropout(p=dropout)

        self.v_layer = nn.Linear(self.d_model, self.d_v)
        self.q_layers = nn.ModuleList([
            nn.Linear(self.d_model, self.d_q) for _ in range(self.n_head)
        ])
        self.k_layers = nn.ModuleList([
            nn.Linear(self.d_model, self.d_k) for _ in range(self.n_head)
        ])
        self.attention = _ScaledDotProductAttention()
        self.w_h = nn.Linear(self.d_v, self.d_model, bias=False)

    def forward(self, q, k, v, mask=None):
        heads = []
        attns = []
        vs = self.v_layer(v)
        for i in range(self.n_head):
            qs = self.q_layers[i](q)
            ks = self.k_layers[i](k)
            head, attn = self.attention(qs, ks, vs, mask)
            head_dropout = self.dropout(head)
            heads.append(head_dropout)
            attns.append(attn)

        head = torch.stack(heads, dim=2) if self.n_head > 1 else heads[0]
        attn = torch.stack(attns, dim=2)

        outputs = torch.mean(head, dim=2) if self.n_head > 1 else head
        outputs = self.w_h(outputs)
        outputs = self.dropout(outputs)

        return outputs, attn


def get_attention_mask_full(time_steps: int, batch_size: int, dtype: torch.dtype, device: torch.device):
    eye = torch.eye(time_steps, dtype=dtype, device=device)
    mask = torch.cumsum(eye.unsqueeze(0).repeat(batch_size, 1, 1), dim=1)
    return mask < 1


class TFTAttentionLayer(nn.Module):
    def __init__(self, d_model=64, n_head=4):
        super().__init__()
        self.multihead_attn = _InterpretableMultiHeadAttention(n_head, d_model)

    def forward(self, x):
        mask = get_attention_mask_full(x.shape[1], x.shape[0], x.dtype, x.device)
        out, _ = self.multihead_attn(q=x, k=x, v=x, mask=mask)
        return out


def build(dtype="float32", device="cpu"):
    """float32 weights run under autocast float16 ('16-mixed'; trace with --autocast fp16),
    48 time steps."""
    torch.manual_seed(0)
    model = TFTAttentionLayer().to(device=device, dtype=getattr(torch, dtype)).eval()
    x = torch.randn(4, 48, 64).to(device=device, dtype=getattr(torch, dtype))
    return model, (x,)

import torch, statistics
torch.manual_seed(0)
def loop_ms(fn, n=100):
    for _ in range(20): fn()
    torch.cuda.synchronize()
    ts=[]
    for _ in range(5):
        a,b=torch.cuda.Event(enable_timing=True),torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(n): fn()
        b.record(); b.synchronize(); ts.append(a.elapsed_time(b)/n)
    return statistics.median(ts)
for m in (4096, 4368):
    for k,n in ((1024,4096),(4096,1024),(1024,3072),(1024,1024)):
        x=torch.randn(m,k,device='cuda',dtype=torch.float16); w=torch.randn(n,k,device='cuda',dtype=torch.float16)*0.02; b=torch.randn(n,device='cuda',dtype=torch.float16)
        fl=2*m*k*n
        r=[("mm",lambda: torch.mm(x,w.t())),("bias",lambda: torch.addmm(b,x,w.t()))]
        if n==4096: r.append(("bias+gelu",lambda: torch._addmm_activation(b,x,w.t(),use_gelu=True)))
        for name,fn in r:
            t=loop_ms(fn); print(f"M={m} K={k} N={n} {name:10s} {t*1e3:7.1f} us {fl/t/1e9:6.0f} TFLOP/s")

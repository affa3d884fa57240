mkdir -p /tmp/site && tar -xJf .sitepack/site.tar.xz -C /tmp/site
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_op_read_hit_rate.pct,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,dram__cycles_active.avg.pct_of_peak_sustained_elapsed
NCU="ncu --clock-control none --metrics $M --csv"
$NCU python3 benchmarks/launch_winner.py --rows rmsnorm:1,gated_mlp:1,rmsnorm:8 --runs 1 > $OUT/plain.csv 2>$OUT/plain.err
$NCU python3 benchmarks/launch_winner.py --rows rmsnorm:1,gated_mlp:1,rmsnorm:8 --runs 1 --set stream_k=132,split=1 > $OUT/sk.csv 2>$OUT/sk.err
$NCU python3 -c "
import torch
W=torch.randn(4096,6144,device='cuda',dtype=torch.float16); W2=torch.randn(2,4096,4096,device='cuda',dtype=torch.float16)
torch.cuda.synchronize(); W.sum(); W2.sum(); torch.cuda.synchronize()
x=torch.randn(2,4096,device='cuda',dtype=torch.float16); (x@W); torch.cuda.synchronize()
" > $OUT/torch.csv 2>$OUT/torch.err
for f in plain sk torch; do echo "== $f"; python3 - $OUT/$f.csv <<'PY'
import csv,sys,collections
rows=[r for r in csv.reader(open(sys.argv[1])) if len(r)>10]
h=rows[0]; i={k:h.index(k) for k in ('ID','Kernel Name','Metric Name','Metric Value')}
by=collections.OrderedDict()
for r in rows[1:]:
    by.setdefault((r[i['ID']],r[i['Kernel Name']][:40]),{})[r[i['Metric Name']]]=r[i['Metric Value']]
for (k,n),m in by.items():
    print(k,n,' '.join(f"{a.split('.')[0].split('__')[1][:14]}={b}" for a,b in m.items()))
PY
done
tail -3 $OUT/plain.err

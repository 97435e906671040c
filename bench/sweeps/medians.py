#!/usr/bin/env python3
"""Median p50 per (op, N, size, algorithm) over several bench/sweep_algorithms.sh
outputs, and the fastest algorithm of each row.

  python3 bench/sweeps/medians.py bench/sweeps/sweep_rep*.txt > bench/sweeps/medians.txt
"""
import re,sys,statistics,collections
data=collections.defaultdict(list)  # (op,N,bytes,algo) -> [p50]
order={}
for f in sys.argv[1:]:
    lines=open(f).read().split("\n")
    i=0
    while i<len(lines):
        m=re.match(r"^(\w+), N=(\d+)$",lines[i])
        if m:
            op,N=m.group(1),int(m.group(2)); hdr=lines[i+1].split(); algos=hdr[1:-1]
            j=i+2
            while j<len(lines) and lines[j].strip():
                parts=lines[j].split()
                b=parts[0]
                for a,v in zip(algos,parts[1:1+len(algos)]):
                    try: data[(op,N,b,a)].append(float(v))
                    except: pass
                order.setdefault((op,N),[]); 
                if b not in order[(op,N)]: order[(op,N)].append(b)
                j+=1
            i=j
        i+=1
algs=collections.defaultdict(set)
for (op,N,b,a) in data: algs[(op,N)].add(a)
for (op,N),sizes in order.items():
    al=sorted(algs[(op,N)])
    print(f"\n{op}, N={N} (median p50 us of 3 runs)")
    print("   bytes "+" ".join(f"{a:>17}" for a in al)+"  fastest")
    for b in sizes:
        meds={a:statistics.median(data[(op,N,b,a)]) for a in al if data[(op,N,b,a)]}
        best=min(meds,key=meds.get)
        print(f"{b:>8} "+" ".join(f"{meds.get(a,float('nan')):>17.1f}" for a in al)+f"  {best}")

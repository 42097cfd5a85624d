from pkg.ops import scale as scale

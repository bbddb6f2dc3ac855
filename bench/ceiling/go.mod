module splitsched.local/bench/ceiling

go 1.22

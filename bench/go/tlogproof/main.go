// Command tlogproof times golang.org/x/mod/sumdb/tlog's proofs over an in-memory hash store: the
// peer of bench/bench_proofs.py (issue 12: "proofs at 10^6 within 3x of Go's tlog in memory").
//
// It appends records "entry <i>" (i = 0 .. n-1) with tlog.StoredHashesForRecordHash into a
// slice (tlog's own stored-hash layout), then times tlog.ProveRecord(n, i) and
// tlog.ProveTree(n, m) for the same pseudo-random indices the Python bench uses (read from a file,
// one per line), in batches, and prints one JSON object on stdout: the tree hash, the proof of
// the first index (base64, for the Python side to compare), and the per-proof times of every batch
// in nanoseconds, wall clock and CPU (user + system of the process, GC threads included).
//
// Usage: tlogproof -n 1000000 -indices FILE -batch 1000 -rounds 20
package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

type memStore []tlog.Hash

func (s *memStore) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		if x < 0 || x >= int64(len(*s)) {
			return nil, fmt.Errorf("no stored hash %d", x)
		}
		out[i] = (*s)[x]
	}
	return out, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "tlogproof:", err)
	os.Exit(2)
}

func main() {
	n := flag.Int64("n", 1000000, "records in the tree")
	indicesFile := flag.String("indices", "", "file of record indices, one per line")
	batch := flag.Int("batch", 1000, "proofs per timed batch")
	rounds := flag.Int("rounds", 20, "timed batches per proof kind")
	flag.Parse()

	var indices []int64
	f, err := os.Open(*indicesFile)
	if err != nil {
		fail(err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		v, err := strconv.ParseInt(sc.Text(), 10, 64)
		if err != nil {
			fail(err)
		}
		indices = append(indices, v)
	}
	f.Close()
	if len(indices) == 0 {
		fail(fmt.Errorf("no indices"))
	}

	store := make(memStore, 0, 2*(*n)+64)
	t0 := time.Now()
	for i := int64(0); i < *n; i++ {
		h := tlog.RecordHash([]byte("entry " + strconv.FormatInt(i, 10)))
		add, err := tlog.StoredHashesForRecordHash(i, h, &store)
		if err != nil {
			fail(err)
		}
		store = append(store, add...)
	}
	build := time.Since(t0)
	root, err := tlog.TreeHash(*n, &store)
	if err != nil {
		fail(err)
	}
	first, err := tlog.ProveRecord(*n, indices[0], &store)
	if err != nil {
		fail(err)
	}
	var firstB64 []string
	for _, h := range first {
		firstB64 = append(firstB64, base64.StdEncoding.EncodeToString(h[:]))
	}

	cpuNow := func() time.Duration { // user + system time of the process (all threads)
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			fail(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	timeKind := func(prove func(int64) error) ([]float64, []float64) {
		var per, perCPU []float64
		k := 0
		for j := 0; j < *batch; j++ { // warm-up, not timed
			if err := prove(indices[j%len(indices)]); err != nil {
				fail(err)
			}
		}
		runtime.GC() // the building's garbage collected now, not during a timed batch
		for r := 0; r < *rounds; r++ {
			startCPU := cpuNow()
			start := time.Now()
			for j := 0; j < *batch; j++ {
				if err := prove(indices[k%len(indices)]); err != nil {
					fail(err)
				}
				k++
			}
			per = append(per, float64(time.Since(start).Nanoseconds())/float64(*batch))
			perCPU = append(perCPU, float64((cpuNow()-startCPU).Nanoseconds())/float64(*batch))
		}
		return per, perCPU
	}
	inclusion, inclusionCPU := timeKind(func(i int64) error {
		_, err := tlog.ProveRecord(*n, i, &store)
		return err
	})
	consistency, consistencyCPU := timeKind(func(i int64) error {
		if i == 0 {
			i = 1
		}
		_, err := tlog.ProveTree(*n, i, &store)
		return err
	})
	out := map[string]any{
		"n":                  *n,
		"build_s":            build.Seconds(),
		"root":               base64.StdEncoding.EncodeToString(root[:]),
		"first_index":        indices[0],
		"first_proof":        firstB64,
		"inclusion_ns":       inclusion,
		"consistency_ns":     consistency,
		"inclusion_cpu_ns":   inclusionCPU,
		"consistency_cpu_ns": consistencyCPU,
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fail(err)
	}
}

// Command go-client calls the splitsched Scheduler API from Go, with stubs generated from
// proto/splitsched/v1 (see generate.sh): it lists the nodes the scheduler sees (ListNodes,
// every page) and, given -pod, explains why that pod is pending (Explain).
//
//	go build -o go-client . && ./go-client -server 127.0.0.1:50050 -pod shop/notol-0
//
// -ca, -cert and -key (env SPLITSCHED_CA, SPLITSCHED_CERT, SPLITSCHED_KEY, as for the
// splitsched CLI) switch to TLS, mutual with cert and key; without them it is plaintext.
//
// Exit codes follow the splitsched CLI: 0 ok, 2 bad flags, 3 the server failed or could
// not be reached, 4 the pod is not tracked by the scheduler. Run the built binary where
// they matter: `go run .` turns any non-zero exit into 1.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	pb "github.com/splitsched/splitsched/examples/go-client/gen/splitschedv1"
)

func main() {
	server := flag.String("server", envOr("SPLITSCHED_SERVER", "127.0.0.1:50050"), "scheduler gRPC address")
	pod := flag.String("pod", "", "NAMESPACE/NAME of a pod to explain")
	timeout := flag.Duration("timeout", 10*time.Second, "deadline of each call")
	caFile := flag.String("ca", os.Getenv("SPLITSCHED_CA"), "CA bundle (PEM) to verify the server")
	certFile := flag.String("cert", os.Getenv("SPLITSCHED_CERT"), "client certificate (PEM), mutual TLS")
	keyFile := flag.String("key", os.Getenv("SPLITSCHED_KEY"), "client private key (PEM)")
	flag.Parse()

	creds, err := transportCredentials(*caFile, *certFile, *keyFile)
	if err != nil {
		fail(2, "%v", err)
	}
	conn, err := grpc.NewClient(*server, grpc.WithTransportCredentials(creds))
	if err != nil {
		fail(2, "bad -server %q: %v", *server, err)
	}
	defer conn.Close()
	client := pb.NewSchedulerClient(conn)

	if err := listNodes(client, *timeout); err != nil {
		failRPC("ListNodes", err)
	}
	if *pod != "" {
		ns, name, ok := strings.Cut(*pod, "/")
		if !ok || ns == "" || name == "" {
			fail(2, "-pod %q: expected NAMESPACE/NAME", *pod)
		}
		if err := explain(client, ns, name, *timeout); err != nil {
			failRPC("Explain", err)
		}
	}
}

// transportCredentials is plaintext unless -ca, -cert or -key is given; then TLS trusting
// the CA (the system roots without one), mutual with the client certificate.
func transportCredentials(caFile, certFile, keyFile string) (credentials.TransportCredentials, error) {
	if caFile == "" && certFile == "" && keyFile == "" {
		return insecure.NewCredentials(), nil
	}
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("-cert and -key: give both (mutual TLS) or neither")
	}
	config := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("-ca: %w", err)
		}
		config.RootCAs = x509.NewCertPool()
		if !config.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-ca %s: no PEM certificate in it", caFile)
		}
	}
	if certFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("-cert/-key: %w", err)
		}
		config.Certificates = []tls.Certificate{pair}
	}
	return credentials.NewTLS(config), nil
}

// listNodes prints every node with its requested/allocatable cpu and memory and taints.
func listNodes(client pb.SchedulerClient, timeout time.Duration) error {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "NODE\tPODS\tCPU (m)\tMEMORY (Mi)\tTAINTS")
	req := &pb.ListNodesRequest{PageSize: 100}
	total := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		resp, err := client.ListNodes(ctx, req)
		cancel()
		if err != nil {
			return err
		}
		for _, n := range resp.GetNodes() {
			var taints []string
			for _, t := range n.GetTaints() {
				taints = append(taints, fmt.Sprintf("%s=%s:%s", t.GetKey(), t.GetValue(), t.GetEffect()))
			}
			if len(taints) == 0 {
				taints = []string{"-"}
			}
			fmt.Fprintf(w, "%s\t%d\t%d/%d\t%d/%d\t%s\n", n.GetName(), n.GetPodCount(),
				n.GetRequested()["cpu"], n.GetAllocatable()["cpu"],
				n.GetRequested()["memory"]>>20, n.GetAllocatable()["memory"]>>20,
				strings.Join(taints, ","))
			total++
		}
		if resp.GetNextPageToken() == "" {
			break
		}
		req.PageToken = resp.GetNextPageToken()
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Printf("%d nodes\n", total)
	return nil
}

// explain prints why a pod is pending: every plugin that rejects nodes, how many, why,
// and on which classes of nodes.
func explain(client pb.SchedulerClient, ns, name string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	resp, err := client.Explain(ctx, &pb.ExplainRequest{Namespace: ns, Name: name})
	if err != nil {
		return err
	}
	fmt.Printf("\npod %s/%s: %s\n", ns, name, resp.GetState())
	fmt.Printf("  %s\n", resp.GetSummary())
	fmt.Printf("  feasible nodes: %d/%d\n", resp.GetFeasibleNodes(), resp.GetTotalNodes())
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "PLUGIN\tREJECTED\tREASONS\tNODE CLASSES")
	for _, v := range resp.GetPlugins() {
		var reasons, classes []string
		for _, r := range v.GetReasons() {
			reasons = append(reasons, fmt.Sprintf("%d %s", r.GetNodes(), r.GetReason()))
		}
		for _, c := range v.GetNodeClasses() {
			classes = append(classes, fmt.Sprintf("%s (%d)", c.GetNodeClass(), c.GetNodes()))
		}
		sort.Strings(classes)
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", v.GetPlugin(), v.GetRejectedNodes(),
			strings.Join(reasons, "; "), strings.Join(classes, ", "))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Printf("  preemption might help: %t\n", resp.GetPreemptionMightHelp())
	return nil
}

func failRPC(call string, err error) {
	st := status.Convert(err)
	if st.Code() == codes.NotFound {
		fail(4, "%s: not found: %s", call, st.Message())
	}
	fail(3, "%s: %s: %s", call, st.Code(), st.Message())
}

func fail(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "error: "+format+"\n", args...)
	os.Exit(code)
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

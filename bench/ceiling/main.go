// Command ceiling binds pods without scheduling them: the most a scheduler could bind on
// this control plane. It lists the nodes once, then list/watches the pending pods with one
// schedulerName and, with -workers Bindings in flight, binds each pod to the next node in
// turn that holds fewer than -pods-per-node pods; its Scheduled Event is written in the
// background, as kube-scheduler's are. No filter, no score, no cache: what is left is the
// API server's cost of taking Bindings and Events, and this client's (Go's HTTP/2 client,
// as client-go uses). bench.sidebyside runs it as the "ceiling" contender and reports each
// scheduler's throughput as a fraction of it.
//
// Only the Go standard library, so it builds with no module download.
package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// eventWorkers write the Scheduled Events in the background: a binding does not wait for
// its Event, as kube-scheduler's does not.
const eventWorkers = 16

type options struct {
	server, ca, cert, key, schedulerName string
	workers, podsPerNode                 int
	events                               bool
}

type meta struct {
	Name            string `json:"name"`
	Namespace       string `json:"namespace"`
	UID             string `json:"uid"`
	ResourceVersion string `json:"resourceVersion"`
}

type pod struct {
	Metadata meta `json:"metadata"`
	Spec     struct {
		NodeName string `json:"nodeName"`
	} `json:"spec"`
}

type list struct {
	Metadata struct {
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Items []json.RawMessage `json:"items"`
}

type watchEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

type client struct {
	http   *http.Client
	server string
}

func newClient(o options) (*client, error) {
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(o.ca)
	if err != nil {
		return nil, err
	}
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%s: no certificate", o.ca)
	}
	pair, err := tls.LoadX509KeyPair(o.cert, o.key)
	if err != nil {
		return nil, err
	}
	transport := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: o.workers,
	}
	return &client{http: &http.Client{Transport: transport}, server: o.server}, nil
}

func (c *client) do(method, path string, body any) (int, []byte, error) {
	var reader io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		reader = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, c.server+path, reader)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// nodes lists the schedulable nodes' names once: the pods go to them in turn.
func (c *client) nodes() ([]string, error) {
	status, data, err := c.do("GET", "/api/v1/nodes", nil)
	if err != nil || status != 200 {
		return nil, fmt.Errorf("listing nodes: HTTP %d %v", status, err)
	}
	var nodes struct {
		Items []struct {
			Metadata meta `json:"metadata"`
			Spec     struct {
				Unschedulable bool `json:"unschedulable"`
			} `json:"spec"`
		} `json:"items"`
	}
	if err := json.Unmarshal(data, &nodes); err != nil {
		return nil, err
	}
	var names []string
	for _, n := range nodes.Items {
		if !n.Spec.Unschedulable {
			names = append(names, n.Metadata.Name)
		}
	}
	if len(names) == 0 {
		return nil, errors.New("no schedulable node")
	}
	return names, nil
}

// boundPods counts the pods already on each node (the workload's initial pods).
func (c *client) boundPods() (map[string]int, error) {
	selector := url.QueryEscape("spec.nodeName!=")
	status, data, err := c.do("GET", "/api/v1/pods?fieldSelector="+selector, nil)
	if err != nil || status != 200 {
		return nil, fmt.Errorf("listing bound pods: HTTP %d %v", status, err)
	}
	var l struct {
		Items []pod `json:"items"`
	}
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, err
	}
	onNode := map[string]int{}
	for _, p := range l.Items {
		onNode[p.Spec.NodeName]++
	}
	return onNode, nil
}

func (c *client) podsPath(o options, extra string) string {
	selector := url.QueryEscape("spec.schedulerName=" + o.schedulerName + ",spec.nodeName=")
	return "/api/v1/pods?fieldSelector=" + selector + extra
}

// feed lists and then watches the pending pods, sending each to `out` once; it re-lists
// when the watch ends.
func (c *client) feed(o options, out chan<- pod, ready func()) {
	seen := map[string]bool{}
	send := func(raw json.RawMessage) {
		var p pod
		if json.Unmarshal(raw, &p) == nil && p.Spec.NodeName == "" && !seen[p.Metadata.UID] {
			seen[p.Metadata.UID] = true
			out <- p
		}
	}
	for {
		status, data, err := c.do("GET", c.podsPath(o, ""), nil)
		if err != nil || status != 200 {
			log.Printf("listing pods: HTTP %d %v", status, err)
			time.Sleep(time.Second)
			continue
		}
		var l list
		if err := json.Unmarshal(data, &l); err != nil {
			log.Fatalf("decoding the pod list: %v", err)
		}
		for _, raw := range l.Items {
			send(raw)
		}
		c.watch(o, l.Metadata.ResourceVersion, send, ready)
	}
}

func (c *client) watch(o options, rv string, send func(json.RawMessage), ready func()) {
	path := c.podsPath(o, "&watch=1&allowWatchBookmarks=true&resourceVersion="+rv)
	req, _ := http.NewRequest("GET", c.server+path, nil)
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		log.Printf("watching pods: %v", err)
		return
	}
	defer resp.Body.Close()
	ready()
	decoder := json.NewDecoder(bufio.NewReader(resp.Body))
	for {
		var ev watchEvent
		if err := decoder.Decode(&ev); err != nil {
			return
		}
		if ev.Type == "ADDED" || ev.Type == "MODIFIED" {
			send(ev.Object)
		}
	}
}

type binder struct {
	c      *client
	o      options
	bound  atomic.Uint64
	events chan placed // written by their own workers, as kube-scheduler's broadcaster does

	mu     sync.Mutex
	nodes  []string
	onNode map[string]int // pods bound to each node, by this client or before it started
	next   int
}

// pick is the next node in turn with room for a pod (-pods-per-node), or "" when full.
func (b *binder) pick() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	for range b.nodes {
		node := b.nodes[b.next%len(b.nodes)]
		b.next++
		if b.onNode[node] < b.o.podsPerNode {
			b.onNode[node]++
			return node
		}
	}
	return ""
}

func (b *binder) bind(p pod) {
	node := b.pick()
	m := p.Metadata
	if node == "" {
		log.Printf("no room for %s/%s: every node holds -pods-per-node pods", m.Namespace, m.Name)
		return
	}
	binding := map[string]any{
		"apiVersion": "v1", "kind": "Binding",
		"metadata": map[string]any{"name": m.Name, "uid": m.UID},
		"target":   map[string]any{"kind": "Node", "name": node},
	}
	path := fmt.Sprintf("/api/v1/namespaces/%s/pods/%s/binding", m.Namespace, m.Name)
	for attempt := 0; ; attempt++ {
		status, body, err := b.c.do("POST", path, binding)
		if err == nil && status == 201 {
			break
		}
		if status == 409 || status == 404 || attempt == 20 {
			log.Printf("binding %s/%s: HTTP %d %v %s", m.Namespace, m.Name, status, err, body)
			b.mu.Lock()
			b.onNode[node]--
			b.mu.Unlock()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.bound.Add(1)
	if b.o.events {
		b.events <- placed{p, node}
	}
}

// placed is a pod bound to a node, whose Event is still to be written.
type placed struct {
	pod  pod
	node string
}

func (b *binder) event(p pod, node string) {
	m := p.Metadata
	now := time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00")
	event := map[string]any{
		"apiVersion": "events.k8s.io/v1", "kind": "Event",
		"metadata":  map[string]any{"generateName": m.Name + ".", "namespace": m.Namespace},
		"eventTime": now, "type": "Normal", "reason": "Scheduled", "action": "Binding",
		"note":                fmt.Sprintf("Successfully assigned %s/%s to %s", m.Namespace, m.Name, node),
		"reportingController": "ceiling", "reportingInstance": "ceiling-" + b.o.schedulerName,
		"regarding": map[string]any{
			"apiVersion": "v1", "kind": "Pod", "namespace": m.Namespace, "name": m.Name, "uid": m.UID,
		},
	}
	path := fmt.Sprintf("/apis/events.k8s.io/v1/namespaces/%s/events", m.Namespace)
	if status, body, err := b.c.do("POST", path, event); err != nil || status != 201 {
		log.Printf("event for %s/%s: HTTP %d %v %s", m.Namespace, m.Name, status, err, body)
	}
}

func main() {
	var o options
	flag.StringVar(&o.server, "server", "", "the API server's URL")
	flag.StringVar(&o.ca, "ca", "", "the CA bundle to trust it with")
	flag.StringVar(&o.cert, "cert", "", "the client certificate")
	flag.StringVar(&o.key, "key", "", "the client key")
	flag.StringVar(&o.schedulerName, "scheduler-name", "ceiling", "the pods' schedulerName")
	flag.IntVar(&o.workers, "workers", 64, "requests in flight")
	flag.BoolVar(&o.events, "events", true, "write each pod's Scheduled Event after its Binding")
	flag.IntVar(&o.podsPerNode, "pods-per-node", 110, "pods a node takes (the workload's shape says)")
	flag.Parse()
	if o.server == "" || o.ca == "" || o.cert == "" || o.key == "" || o.workers < 1 || o.podsPerNode < 1 {
		fmt.Fprintln(os.Stderr, "ceiling: -server, -ca, -cert and -key are required; -workers, -pods-per-node >= 1")
		os.Exit(2)
	}
	c, err := newClient(o)
	if err != nil {
		log.Fatalf("ceiling: %v", err)
	}
	nodes, err := c.nodes()
	if err != nil {
		log.Fatalf("ceiling: %v", err)
	}
	onNode, err := c.boundPods()
	if err != nil {
		log.Fatalf("ceiling: %v", err)
	}
	b := &binder{c: c, o: o, nodes: nodes, onNode: onNode, events: make(chan placed, 1<<20)}
	for i := 0; i < eventWorkers; i++ {
		go func() {
			for e := range b.events {
				b.event(e.pod, e.node)
			}
		}()
	}
	pods := make(chan pod, 1024)
	var once sync.Once
	ready := func() { once.Do(func() { fmt.Printf("ready: %d nodes\n", len(nodes)) }) }
	for i := 0; i < o.workers; i++ {
		go func() {
			for p := range pods {
				b.bind(p)
			}
		}()
	}
	go func() {
		for range time.Tick(10 * time.Second) {
			log.Printf("bound %d", b.bound.Load())
		}
	}()
	c.feed(o, pods, ready)
}

// Command clientcheck drives a running eventflow stack through the generated Go client:
// it creates a tenant, uploads and approves an action, publishes a workflow that runs it,
// publishes an event, and reads back the instance and the projection the action wrote.
//
// It prints a JSON summary on stdout and exits 0, or prints the failing call with its gRPC
// status code and ErrorInfo reason on stderr and exits 1. The operator token comes from
// EVENTFLOW_OPERATOR_TOKEN so that it never shows in a process listing.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func main() {
	var opts Options
	flag.StringVar(&opts.Address, "address", "127.0.0.1:7233", "the stack's public gRPC address")
	flag.StringVar(&opts.WasmPath, "wasm", "", "the action's WebAssembly module")
	flag.StringVar(&opts.Projection.Name, "projection", "", "projection name the action writes")
	flag.StringVar(&opts.Projection.EntityType, "entity-type", "", "its entity type")
	flag.StringVar(&opts.Projection.EntityID, "entity-id", "", "its entity id")
	flag.Parse()
	opts.OperatorToken = os.Getenv("EVENTFLOW_OPERATOR_TOKEN")
	if err := run(opts); err != nil {
		fmt.Fprintf(os.Stderr, "error: %s\n", describe(err))
		os.Exit(1)
	}
}

func run(opts Options) error {
	if opts.OperatorToken == "" || opts.WasmPath == "" || opts.Projection.Name == "" {
		return fmt.Errorf("EVENTFLOW_OPERATOR_TOKEN, -wasm and -projection are required")
	}
	module, err := os.ReadFile(opts.WasmPath)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(opts.Address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	summary, err := NewScenario(conn, opts).Run(ctx, module)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(summary)
}

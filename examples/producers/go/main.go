// Command produce writes one CloudEvent to eventflow's Kafka topic with franz-go.
//
// It follows docs/events.md: CloudEvents 1.0 in binary mode (ce_ headers, the data as the
// record value) or structured mode (the whole event as one JSON object), with the tenant
// in the orgid/projectid extensions and the record key <orgid>/<projectid>/<subject>, so
// that one subject's events stay in order on one partition.
//
//	go run . -brokers 127.0.0.1:9092 -org acme -project web \
//	    -type user.signed_up -data '{"userId": "u-1"}'
//
// It prints {"id": ..., "key": ..., "partition": ..., "offset": ...} on success.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The data fields eventflow keys by when an event has no subject (docs/events.md).
var subjectFields = []string{"audienceId", "userId", "actorId", "targetUserId", "email"}

var integer = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

type event struct {
	ID          string
	Source      string
	Type        string
	Org         string
	Project     string
	Environment string
	Subject     string
	Time        time.Time
	Data        json.RawMessage
}

func main() {
	brokers := flag.String("brokers", envOr("EVENTFLOW_KAFKA_BOOTSTRAP", "127.0.0.1:9092"), "Kafka bootstrap servers, comma-separated")
	topic := flag.String("topic", "eventflow.events", "the events topic (<namespace>.eventflow.events with a namespace)")
	mode := flag.String("mode", "binary", "CloudEvents mode: binary or structured")
	traceparent := flag.String("traceparent", "", "W3C traceparent to send as the record's traceparent header")
	var e event
	flag.StringVar(&e.ID, "id", "", "event id (default: a random UUID); re-sending an id is a no-op")
	flag.StringVar(&e.Source, "source", "examples/producers/go", "CloudEvents source")
	flag.StringVar(&e.Type, "type", "", "event type, e.g. user.signed_up (required)")
	flag.StringVar(&e.Org, "org", "", "organization id, the orgid extension (required)")
	flag.StringVar(&e.Project, "project", "", "project id, the projectid extension (required)")
	flag.StringVar(&e.Environment, "environment", "production", "production or sandbox")
	flag.StringVar(&e.Subject, "subject", "", "CloudEvents subject (optional)")
	data := flag.String("data", "{}", "the payload, a JSON object")
	flag.Parse()

	if err := e.complete(*data); err != nil {
		fmt.Fprintln(os.Stderr, "produce:", err)
		os.Exit(2)
	}
	record, err := e.record(*topic, *mode)
	if err != nil {
		fmt.Fprintln(os.Stderr, "produce:", err)
		os.Exit(2)
	}
	if *traceparent != "" {
		record.Headers = append(record.Headers, kgo.RecordHeader{Key: "traceparent", Value: []byte(*traceparent)})
	}
	if err := send(strings.Split(*brokers, ","), record); err != nil {
		fmt.Fprintln(os.Stderr, "produce:", err)
		os.Exit(1)
	}
	out, _ := json.Marshal(map[string]any{
		"id": e.ID, "key": string(record.Key), "partition": record.Partition, "offset": record.Offset,
	})
	fmt.Println(string(out))
}

func (e *event) complete(data string) error {
	if e.Type == "" || e.Org == "" || e.Project == "" {
		return errors.New("-type, -org and -project are required")
	}
	var object map[string]any
	if err := json.Unmarshal([]byte(data), &object); err != nil || object == nil {
		return errors.New("-data must be a JSON object")
	}
	e.Data = json.RawMessage(data)
	if e.ID == "" {
		e.ID = newUUID()
	}
	e.Time = time.Now().UTC()
	return nil
}

// key is <orgid>/<projectid>/<who>: who is the subject, else the first subject field of
// the data, else the event id -- the key eventflow's own Publish uses.
func (e *event) key() []byte {
	who := e.Subject
	if who == "" {
		decoder := json.NewDecoder(bytes.NewReader(e.Data))
		decoder.UseNumber()
		var object map[string]any
		_ = decoder.Decode(&object)
		for _, field := range subjectFields {
			if who = subjectText(object[field]); who != "" {
				break
			}
		}
	}
	if who == "" {
		who = e.ID
	}
	return []byte(e.Org + "/" + e.Project + "/" + who)
}

// attributes are the CloudEvents context attributes and eventflow's extensions.
func (e *event) attributes() [][2]string {
	attrs := [][2]string{
		{"specversion", "1.0"},
		{"id", e.ID},
		{"source", e.Source},
		{"type", e.Type},
		{"time", e.Time.Format(time.RFC3339Nano)},
		{"orgid", e.Org},
		{"projectid", e.Project},
		{"environment", e.Environment},
	}
	if e.Subject != "" {
		attrs = append(attrs, [2]string{"subject", e.Subject})
	}
	return attrs
}

// subjectText is a non-empty string, or an integer written without fraction or exponent.
func subjectText(value any) string {
	switch v := value.(type) {
	case string:
		return v
	case json.Number:
		if integer.MatchString(string(v)) {
			return string(v)
		}
	}
	return ""
}

func (e *event) record(topic, mode string) (*kgo.Record, error) {
	record := &kgo.Record{Topic: topic, Key: e.key()}
	switch mode {
	case "binary":
		for _, attr := range e.attributes() {
			record.Headers = append(record.Headers, kgo.RecordHeader{Key: "ce_" + attr[0], Value: []byte(attr[1])})
		}
		record.Headers = append(record.Headers, kgo.RecordHeader{Key: "content-type", Value: []byte("application/json")})
		record.Value = e.Data
	case "structured":
		envelope := map[string]any{"datacontenttype": "application/json", "data": e.Data}
		for _, attr := range e.attributes() {
			envelope[attr[0]] = attr[1]
		}
		value, err := json.Marshal(envelope)
		if err != nil {
			return nil, err
		}
		record.Headers = []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/cloudevents+json; charset=utf-8")}}
		record.Value = value
	default:
		return nil, fmt.Errorf("-mode must be binary or structured, not %q", mode)
	}
	return record, nil
}

func send(brokers []string, record *kgo.Record) error {
	client, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		// franz-go's default hash partitioner (murmur2, like the Java client) keeps one
		// key on one partition. Acks from all replicas and idempotent writes are its
		// defaults, so a retried send is written once.
		kgo.ProducerBatchMaxBytes(2<<20), // up to 1 MiB of data plus the envelope
		// Any codec works; gzip is chosen explicitly (franz-go's default is snappy).
		kgo.ProducerBatchCompression(kgo.GzipCompression()),
	)
	if err != nil {
		return err
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return client.ProduceSync(ctx, record).FirstErr()
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func envOr(name, fallback string) string {
	if value := os.Getenv(name); value != "" {
		return value
	}
	return fallback
}

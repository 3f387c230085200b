package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	governancev1 "eventflow/clients/go/eventflow/governance/v1"
	orchestratorv1 "eventflow/clients/go/eventflow/orchestrator/v1"
	registryv1 "eventflow/clients/go/eventflow/registry/v1"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

const (
	project     = "main"
	chunkSize   = 64 * 1024
	pollEvery   = 100 * time.Millisecond
	reactWithin = 3 * time.Second
	settleLimit = 60 * time.Second
)

// Options are the program's inputs.
type Options struct {
	Address       string
	OperatorToken string
	WasmPath      string
	Projection    ProjectionKey
}

type ProjectionKey struct {
	Name       string `json:"name"`
	EntityType string `json:"entity_type"`
	EntityID   string `json:"entity_id"`
}

// Summary is what the program prints: every id it created and everything it read back.
type Summary struct {
	Client          string            `json:"client"`
	Organization    string            `json:"organization"`
	Action          ActionSummary     `json:"action"`
	WorkflowID      string            `json:"workflow_id"`
	WorkflowVersion int32             `json:"workflow_version"`
	EventID         string            `json:"event_id"`
	PublishedEvents []string          `json:"published_event_ids"`
	Instance        InstanceSummary   `json:"instance"`
	Projection      ProjectionSummary `json:"projection"`
}

type ActionSummary struct {
	Name         string `json:"name"`
	Version      int32  `json:"version"`
	ReviewStatus string `json:"review_status"`
}

type InstanceSummary struct {
	ID         string `json:"id"`
	Status     string `json:"status"`
	WorkflowID string `json:"workflow_id"`
	EventID    string `json:"event_id"`
}

type ProjectionSummary struct {
	ProjectionKey
	Status         string         `json:"status"`
	Data           map[string]any `json:"data"`
	LastEventID    string         `json:"last_event_id"`
	LastInstanceID string         `json:"last_instance_id"`
}

// Scenario holds one client per service the flow calls, over a single connection.
type Scenario struct {
	opts        Options
	tenancy     registryv1.TenancyServiceClient
	workflows   registryv1.WorkflowServiceClient
	actions     governancev1.ActionServiceClient
	events      orchestratorv1.EventServiceClient
	instances   orchestratorv1.InstanceServiceClient
	projections orchestratorv1.ProjectionServiceClient
	summary     Summary
}

func NewScenario(conn grpc.ClientConnInterface, opts Options) *Scenario {
	return &Scenario{
		opts:        opts,
		tenancy:     registryv1.NewTenancyServiceClient(conn),
		workflows:   registryv1.NewWorkflowServiceClient(conn),
		actions:     governancev1.NewActionServiceClient(conn),
		events:      orchestratorv1.NewEventServiceClient(conn),
		instances:   orchestratorv1.NewInstanceServiceClient(conn),
		projections: orchestratorv1.NewProjectionServiceClient(conn),
		summary:     Summary{Client: "go"},
	}
}

func as(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

func (s *Scenario) Run(ctx context.Context, module []byte) (*Summary, error) {
	admin, developer, err := s.createTenant(as(ctx, s.opts.OperatorToken))
	if err != nil {
		return nil, err
	}
	if err := s.uploadAndApprove(as(ctx, developer), as(ctx, admin), module); err != nil {
		return nil, err
	}
	trigger, err := s.createAndPublishWorkflow(as(ctx, developer))
	if err != nil {
		return nil, err
	}
	reaction, err := s.publishAndSettle(as(ctx, developer), trigger)
	if err != nil {
		return nil, err
	}
	if err := s.readBack(as(ctx, developer), reaction); err != nil {
		return nil, err
	}
	return &s.summary, nil
}

// createTenant makes an organization with a project and returns its admin and developer keys.
func (s *Scenario) createTenant(ctx context.Context) (string, string, error) {
	org := "org-go-" + randomHex(5)
	_, err := s.tenancy.CreateOrganization(ctx, &registryv1.CreateOrganizationRequest{
		Organization: &registryv1.Organization{Id: org, DisplayName: "Go client check", Plan: "team"},
	})
	if err != nil {
		return "", "", step("create organization", err)
	}
	_, err = s.tenancy.CreateProject(ctx, &registryv1.CreateProjectRequest{
		OrganizationId: org, Project: &registryv1.Project{Id: project},
	})
	if err != nil {
		return "", "", step("create project", err)
	}
	keys := map[string]string{}
	for _, role := range []string{"admin", "developer"} {
		created, err := s.tenancy.CreateApiKey(ctx, &registryv1.CreateApiKeyRequest{
			OrganizationId: org, Role: role, Description: "go client check",
		})
		if err != nil {
			return "", "", step("create "+role+" key", err)
		}
		keys[role] = created.GetSecret()
	}
	s.summary.Organization = org
	return keys["admin"], keys["developer"], nil
}

// uploadAndApprove streams the module (header first, then chunks) and approves the version.
func (s *Scenario) uploadAndApprove(developer, admin context.Context, module []byte) error {
	name := "go-check-" + randomHex(4)
	stream, err := s.actions.UploadActionVersion(developer)
	if err != nil {
		return step("upload action", err)
	}
	header := &governancev1.UploadActionVersionRequest{
		Part: &governancev1.UploadActionVersionRequest_Header{
			Header: &governancev1.UploadHeader{Name: name, Description: "writes a keyed projection"},
		},
	}
	if err := stream.Send(header); err != nil {
		return step("upload action", err)
	}
	for start := 0; start < len(module); start += chunkSize {
		end := min(start+chunkSize, len(module))
		chunk := &governancev1.UploadActionVersionRequest{
			Part: &governancev1.UploadActionVersionRequest_Chunk{Chunk: module[start:end]},
		}
		if err := stream.Send(chunk); err != nil {
			break // the server ended the stream: CloseAndRecv returns its status
		}
	}
	uploaded, err := stream.CloseAndRecv()
	if err != nil {
		return step("upload action", err)
	}
	reviewed, err := s.actions.ReviewActionVersion(admin, &governancev1.ReviewActionVersionRequest{
		Action: name, Version: uploaded.GetVersion().GetVersion(), Decision: "approved",
		Comment: "approved by the Go client check",
	})
	if err != nil {
		return step("approve action", err)
	}
	s.summary.Action = ActionSummary{
		Name: name, Version: reviewed.GetVersion().GetVersion(),
		ReviewStatus: reviewed.GetVersion().GetReviewStatus(),
	}
	return nil
}

func (s *Scenario) createAndPublishWorkflow(ctx context.Context) (string, error) {
	trigger := "client.check." + randomHex(4)
	created, err := s.workflows.CreateWorkflow(ctx, &registryv1.CreateWorkflowRequest{
		ProjectId: project,
		Workflow: &registryv1.Workflow{
			Name:         "Go client check",
			TriggerEvent: trigger,
			Steps: []*registryv1.Step{
				{Name: "project", Type: "custom_action", Action: s.summary.Action.Name},
			},
		},
	})
	if err != nil {
		return "", step("create workflow", err)
	}
	id := created.GetWorkflow().GetId()
	published, err := s.workflows.PublishWorkflow(ctx, &registryv1.PublishWorkflowRequest{
		Id: id, Message: "Go client check",
	})
	if err != nil {
		return "", step("publish workflow", err)
	}
	s.summary.WorkflowID = id
	s.summary.WorkflowVersion = published.GetWorkflow().GetPublishedVersion()
	return trigger, nil
}

// publishAndSettle waits until the orchestrator has learned the new workflow (it does so
// asynchronously, and an event that arrives before then starts nothing): it publishes
// probe events until one gets a reaction, then publishes the real event and polls until
// its instance has finished.
func (s *Scenario) publishAndSettle(ctx context.Context, trigger string) (*orchestratorv1.Reaction, error) {
	deadline := time.Now().Add(settleLimit)
	for {
		probe, err := s.publish(ctx, trigger, `{"probe": true}`)
		if err != nil {
			return nil, err
		}
		reactions, err := s.awaitReactions(ctx, probe, time.Now().Add(reactWithin), false)
		if err != nil {
			return nil, err
		}
		if len(reactions) > 0 {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no workflow reacted to %s events within %s", trigger, settleLimit)
		}
	}
	eventID, err := s.publish(ctx, trigger, `{"client": "go"}`)
	if err != nil {
		return nil, err
	}
	s.summary.EventID = eventID
	reactions, err := s.awaitReactions(ctx, eventID, time.Now().Add(settleLimit), true)
	if err != nil {
		return nil, err
	}
	if len(reactions) != 1 {
		return nil, fmt.Errorf("event %s: %d reactions, want 1 settled", eventID, len(reactions))
	}
	return reactions[0], nil
}

func (s *Scenario) publish(ctx context.Context, trigger, data string) (string, error) {
	published, err := s.events.Publish(ctx, &orchestratorv1.PublishRequest{
		Event: &orchestratorv1.EventInput{
			ProjectId: project, Type: trigger, Source: "go-client-check", DataJson: data,
		},
	})
	if err != nil {
		return "", step("publish event", err)
	}
	s.summary.PublishedEvents = append(s.summary.PublishedEvents, published.GetEventId())
	return published.GetEventId(), nil
}

// awaitReactions polls until the event has a reaction (settled: and all have finished).
func (s *Scenario) awaitReactions(
	ctx context.Context, eventID string, until time.Time, settled bool,
) ([]*orchestratorv1.Reaction, error) {
	for {
		found, err := s.events.ListEventReactions(ctx, &orchestratorv1.ListEventReactionsRequest{
			EventId: eventID, ProjectId: project,
		})
		if err != nil && status.Code(err) != codes.NotFound { // NOT_FOUND: not ingested yet
			return nil, step("list event reactions", err)
		}
		reactions := found.GetReactions()
		if len(reactions) > 0 && (!settled || allFinished(reactions)) {
			return reactions, nil
		}
		if time.Now().After(until) {
			if settled {
				return nil, fmt.Errorf("event %s did not settle: %v", eventID, reactions)
			}
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pollEvery):
		}
	}
}

func allFinished(reactions []*orchestratorv1.Reaction) bool {
	for _, r := range reactions {
		switch r.GetInstanceStatus() {
		case "completed", "failed", "canceled":
		default:
			return false
		}
	}
	return true
}

func (s *Scenario) readBack(ctx context.Context, reaction *orchestratorv1.Reaction) error {
	got, err := s.instances.GetInstance(ctx, &orchestratorv1.GetInstanceRequest{Id: reaction.GetInstanceId()})
	if err != nil {
		return step("get instance", err)
	}
	instance := got.GetInstance()
	s.summary.Instance = InstanceSummary{
		ID: instance.GetId(), Status: instance.GetStatus(),
		WorkflowID: instance.GetWorkflowId(), EventID: instance.GetEventId(),
	}
	key := s.opts.Projection
	read, err := s.projections.GetProjection(ctx, &orchestratorv1.GetProjectionRequest{
		ProjectId: project, Name: key.Name, EntityType: key.EntityType, EntityId: key.EntityID,
	})
	if err != nil {
		return step("get projection", err)
	}
	projection := read.GetProjection()
	var data map[string]any
	if err := json.Unmarshal([]byte(projection.GetDataJson()), &data); err != nil {
		return fmt.Errorf("projection data_json is not a JSON object: %w", err)
	}
	s.summary.Projection = ProjectionSummary{
		ProjectionKey: ProjectionKey{
			Name: projection.GetName(), EntityType: projection.GetEntityType(),
			EntityID: projection.GetEntityId(),
		},
		Status: projection.GetStatus(), Data: data,
		LastEventID: projection.GetLastEventId(), LastInstanceID: projection.GetLastInstanceId(),
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

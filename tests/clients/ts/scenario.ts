import { randomBytes } from "node:crypto";
import { type ChannelCredentials, Metadata, type ServiceError, status } from "@grpc/grpc-js";

import {
  ActionServiceClient,
  ReviewActionVersionRequest,
  type ReviewActionVersionResponse,
  UploadActionVersionRequest,
  type UploadActionVersionResponse,
} from "./gen/eventflow/governance/v1/action_service";
import type { Reaction } from "./gen/eventflow/orchestrator/v1/event";
import {
  EventServiceClient,
  ListEventReactionsRequest,
  type ListEventReactionsResponse,
  PublishRequest,
  type PublishResponse,
} from "./gen/eventflow/orchestrator/v1/event_service";
import {
  type GetInstanceResponse,
  InstanceServiceClient,
} from "./gen/eventflow/orchestrator/v1/instance_service";
import {
  GetProjectionRequest,
  type GetProjectionResponse,
  ProjectionServiceClient,
} from "./gen/eventflow/orchestrator/v1/projection_service";
import {
  CreateApiKeyRequest,
  type CreateApiKeyResponse,
  CreateOrganizationRequest,
  type CreateOrganizationResponse,
  CreateProjectRequest,
  type CreateProjectResponse,
  TenancyServiceClient,
} from "./gen/eventflow/registry/v1/tenancy_service";
import {
  CreateWorkflowRequest,
  type CreateWorkflowResponse,
  type PublishWorkflowResponse,
  WorkflowServiceClient,
} from "./gen/eventflow/registry/v1/workflow_service";
import { StepError } from "./status";

const PROJECT = "main";
const CHUNK_SIZE = 64 * 1024;
const POLL_EVERY_MS = 100;
const REACT_WITHIN_MS = 3_000;
const SETTLE_LIMIT_MS = 60_000;
const FINISHED = new Set(["completed", "failed", "canceled"]);

export interface ProjectionKey {
  name: string;
  entityType: string;
  entityId: string;
}

export interface Options {
  operatorToken: string;
  projection: ProjectionKey;
}

type Callback<T> = (error: ServiceError | null, response: T) => void;

/** Turns one callback-style call into a promise; a failure names the step. */
function call<T>(step: string, start: (done: Callback<T>) => unknown): Promise<T> {
  return new Promise((resolve, reject) => {
    start((error, response) => (error ? reject(new StepError(step, error)) : resolve(response)));
  });
}

function as(token: string): Metadata {
  const metadata = new Metadata();
  metadata.set("authorization", `Bearer ${token}`);
  return metadata;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const randomHex = (n: number) => randomBytes(n).toString("hex");

/** One client per service the flow calls; the summary is filled in as it goes. */
export class Scenario {
  private readonly tenancy: TenancyServiceClient;
  private readonly workflows: WorkflowServiceClient;
  private readonly actions: ActionServiceClient;
  private readonly events: EventServiceClient;
  private readonly instances: InstanceServiceClient;
  private readonly projections: ProjectionServiceClient;
  private readonly summary: Record<string, unknown> = { client: "ts" };
  private readonly published: string[] = [];

  constructor(
    address: string,
    channel: ChannelCredentials,
    private readonly options: Options,
  ) {
    this.tenancy = new TenancyServiceClient(address, channel);
    // The other clients share the first one's channel.
    const shared = { channelOverride: this.tenancy.getChannel() };
    this.workflows = new WorkflowServiceClient(address, channel, shared);
    this.actions = new ActionServiceClient(address, channel, shared);
    this.events = new EventServiceClient(address, channel, shared);
    this.instances = new InstanceServiceClient(address, channel, shared);
    this.projections = new ProjectionServiceClient(address, channel, shared);
  }

  close(): void {
    this.tenancy.close();
  }

  async run(module: Buffer): Promise<Record<string, unknown>> {
    const { admin, developer } = await this.createTenant(as(this.options.operatorToken));
    const action = await this.uploadAndApprove(as(developer), as(admin), module);
    const trigger = await this.createAndPublishWorkflow(as(developer), action);
    const reaction = await this.publishAndSettle(as(developer), trigger);
    await this.readBack(as(developer), reaction);
    return this.summary;
  }

  /** An organization with a project; its admin and developer keys. */
  private async createTenant(operator: Metadata): Promise<{ admin: string; developer: string }> {
    const org = `org-ts-${randomHex(5)}`;
    await call<CreateOrganizationResponse>("create organization", (done) =>
      this.tenancy.createOrganization(
        CreateOrganizationRequest.fromPartial({
          organization: { id: org, displayName: "TypeScript client check", plan: "team" },
        }),
        operator,
        done,
      ),
    );
    await call<CreateProjectResponse>("create project", (done) =>
      this.tenancy.createProject(
        CreateProjectRequest.fromPartial({ organizationId: org, project: { id: PROJECT } }),
        operator,
        done,
      ),
    );
    const key = async (role: string) =>
      (
        await call<CreateApiKeyResponse>(`create ${role} key`, (done) =>
          this.tenancy.createApiKey(
            CreateApiKeyRequest.fromPartial({
              organizationId: org,
              role,
              description: "ts client check",
            }),
            operator,
            done,
          ),
        )
      ).secret;
    this.summary.organization = org;
    return { admin: await key("admin"), developer: await key("developer") };
  }

  /** Streams the module (header first, then chunks) and approves the version. */
  private async uploadAndApprove(
    developer: Metadata,
    admin: Metadata,
    module: Buffer,
  ): Promise<string> {
    const name = `ts-check-${randomHex(4)}`;
    const uploaded = await call<UploadActionVersionResponse>("upload action", (done) => {
      const stream = this.actions.uploadActionVersion(developer, done);
      stream.write(
        UploadActionVersionRequest.fromPartial({
          header: { name, description: "writes a keyed projection" },
        }),
      );
      for (let start = 0; start < module.length; start += CHUNK_SIZE) {
        stream.write({ chunk: module.subarray(start, start + CHUNK_SIZE) });
      }
      stream.end();
    });
    const reviewed = await call<ReviewActionVersionResponse>("approve action", (done) =>
      this.actions.reviewActionVersion(
        ReviewActionVersionRequest.fromPartial({
          action: name,
          version: uploaded.version?.version ?? 0,
          decision: "approved",
          comment: "approved by the TypeScript client check",
        }),
        admin,
        done,
      ),
    );
    this.summary.action = {
      name,
      version: reviewed.version?.version,
      review_status: reviewed.version?.reviewStatus,
    };
    return name;
  }

  private async createAndPublishWorkflow(developer: Metadata, action: string): Promise<string> {
    const trigger = `client.check.${randomHex(4)}`;
    const created = await call<CreateWorkflowResponse>("create workflow", (done) =>
      this.workflows.createWorkflow(
        CreateWorkflowRequest.fromPartial({
          projectId: PROJECT,
          workflow: {
            name: "TypeScript client check",
            triggerEvent: trigger,
            steps: [{ name: "project", type: "custom_action", action }],
          },
        }),
        developer,
        done,
      ),
    );
    const id = created.workflow?.id ?? "";
    const published = await call<PublishWorkflowResponse>("publish workflow", (done) =>
      this.workflows.publishWorkflow({ id, message: "TypeScript client check" }, developer, done),
    );
    this.summary.workflow_id = id;
    this.summary.workflow_version = published.workflow?.publishedVersion;
    return trigger;
  }

  /**
   * The orchestrator learns a new workflow asynchronously, and an event that arrives before
   * then starts nothing: publish probe events until one gets a reaction, then publish the
   * real event and poll until its instance has finished.
   */
  private async publishAndSettle(developer: Metadata, trigger: string): Promise<Reaction> {
    const deadline = Date.now() + SETTLE_LIMIT_MS;
    for (;;) {
      const probe = await this.publish(developer, trigger, { probe: true });
      if ((await this.awaitReactions(developer, probe, Date.now() + REACT_WITHIN_MS, false)).length)
        break;
      if (Date.now() > deadline) {
        throw new Error(`no workflow reacted to ${trigger} events within ${SETTLE_LIMIT_MS} ms`);
      }
    }
    const eventId = await this.publish(developer, trigger, { client: "ts" });
    this.summary.event_id = eventId;
    this.summary.published_event_ids = this.published;
    const reactions = await this.awaitReactions(
      developer,
      eventId,
      Date.now() + SETTLE_LIMIT_MS,
      true,
    );
    if (reactions.length !== 1) {
      throw new Error(`event ${eventId}: ${reactions.length} reactions, want 1 settled`);
    }
    return reactions[0];
  }

  private async publish(developer: Metadata, trigger: string, data: object): Promise<string> {
    const published = await call<PublishResponse>("publish event", (done) =>
      this.events.publish(
        PublishRequest.fromPartial({
          event: {
            projectId: PROJECT,
            type: trigger,
            source: "ts-client-check",
            dataJson: JSON.stringify(data),
          },
        }),
        developer,
        done,
      ),
    );
    this.published.push(published.eventId);
    return published.eventId;
  }

  /** Polls until the event has a reaction (settled: and all have finished). */
  private async awaitReactions(
    developer: Metadata,
    eventId: string,
    until: number,
    settled: boolean,
  ): Promise<Reaction[]> {
    for (;;) {
      const reactions = await this.reactions(developer, eventId);
      if (
        reactions.length &&
        (!settled || reactions.every((r) => FINISHED.has(r.instanceStatus)))
      ) {
        return reactions;
      }
      if (Date.now() > until) {
        if (settled)
          throw new Error(`event ${eventId} did not settle: ${JSON.stringify(reactions)}`);
        return [];
      }
      await sleep(POLL_EVERY_MS);
    }
  }

  private async reactions(developer: Metadata, eventId: string): Promise<Reaction[]> {
    try {
      const found = await call<ListEventReactionsResponse>("list event reactions", (done) =>
        this.events.listEventReactions(
          ListEventReactionsRequest.fromPartial({ eventId, projectId: PROJECT }),
          developer,
          done,
        ),
      );
      return found.reactions;
    } catch (error) {
      // NOT_FOUND until ingest has stored the event.
      if (error instanceof StepError && error.cause.code === status.NOT_FOUND) return [];
      throw error;
    }
  }

  private async readBack(developer: Metadata, reaction: Reaction): Promise<void> {
    const { instance } = await call<GetInstanceResponse>("get instance", (done) =>
      this.instances.getInstance({ id: reaction.instanceId }, developer, done),
    );
    this.summary.instance = {
      id: instance?.id,
      status: instance?.status,
      workflow_id: instance?.workflowId,
      event_id: instance?.eventId,
    };
    const key = this.options.projection;
    const { projection } = await call<GetProjectionResponse>("get projection", (done) =>
      this.projections.getProjection(
        GetProjectionRequest.fromPartial({ projectId: PROJECT, ...key }),
        developer,
        done,
      ),
    );
    this.summary.projection = {
      name: projection?.name,
      entity_type: projection?.entityType,
      entity_id: projection?.entityId,
      status: projection?.status,
      data: JSON.parse(projection?.dataJson || "null"),
      last_event_id: projection?.lastEventId,
      last_instance_id: projection?.lastInstanceId,
    };
  }
}

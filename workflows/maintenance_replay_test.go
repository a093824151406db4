package workflows

import (
	"strconv"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	taskqueuepb "go.temporal.io/api/taskqueue/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// maintenanceStep is one activity of Maintenance, with the change that brought it in ("":
// there from the start).
type maintenanceStep struct{ change, activity string }

// maintenanceSteps are Maintenance's activities in the order it runs them.
var maintenanceSteps = []maintenanceStep{
	{"", DeleteExpiredIdempotencyKeysActivity},
	{"", DeleteExpiredEventsActivity},
	{"", DeleteExpiredOAuthTokensActivity},
	{requestLogRetentionChange, DeleteExpiredRequestLogsActivity},
	{sessionRetentionChange, DeleteExpiredSessionsActivity},
	{webhookRetentionChange, DeleteExpiredWebhookDeliveriesActivity},
}

// TestMaintenanceReplaysRunsOfEveryEarlierVersion replays the history that each version
// of Maintenance leaves (no recorded history of it is in testdata: the e2e recorder records
// orders), written event by event as the SDK writes them: a run that an older worker
// started and a newer one finishes must take the same steps.
func TestMaintenanceReplaysRunsOfEveryEarlierVersion(t *testing.T) {
	replayer := worker.NewWorkflowReplayer()
	replayer.RegisterWorkflowWithOptions(Maintenance, workflow.RegisterOptions{Name: MaintenanceWorkflow})
	for n := 3; n <= len(maintenanceSteps); n++ {
		steps := maintenanceSteps[:n]
		t.Run(steps[n-1].activity, func(t *testing.T) {
			if err := replayer.ReplayWorkflowHistory(nil, maintenanceHistory(t, steps, true)); err != nil {
				t.Fatalf("replay: %v", err)
			}
		})
	}
	// The replay does check: a run that deleted webhook deliveries without recording the
	// change is not one this code could have made.
	if err := replayer.ReplayWorkflowHistory(nil, maintenanceHistory(t, maintenanceSteps, false)); err == nil {
		t.Fatal("a history without its version markers replayed")
	}
}

// maintenanceHistory is the history of a Maintenance run that completed steps, each in a
// workflow task of its own, and with the version marker (and the search attribute upsert
// that follows it) before each step that a change brought in, when markers is set.
func maintenanceHistory(t *testing.T, steps []maintenanceStep, markers bool) *historypb.History {
	t.Helper()
	dc := converter.GetDefaultDataConverter()
	payloads := func(v ...any) *commonpb.Payloads {
		p, err := dc.ToPayloads(v...)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	h := &historypb.History{}
	at := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	add := func(typ enumspb.EventType, set func(e *historypb.HistoryEvent)) int64 {
		at = at.Add(time.Millisecond)
		e := &historypb.HistoryEvent{EventId: int64(len(h.Events) + 1), EventTime: timestamppb.New(at), EventType: typ}
		set(e)
		h.Events = append(h.Events, e)
		return e.EventId
	}
	queue := &taskqueuepb.TaskQueue{Name: TaskQueue, Kind: enumspb.TASK_QUEUE_KIND_NORMAL}
	workflowTask := func() int64 {
		scheduled := add(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, func(e *historypb.HistoryEvent) {
			e.Attributes = &historypb.HistoryEvent_WorkflowTaskScheduledEventAttributes{WorkflowTaskScheduledEventAttributes: &historypb.WorkflowTaskScheduledEventAttributes{
				TaskQueue: queue, StartToCloseTimeout: durationpb.New(10 * time.Second), Attempt: 1}}
		})
		started := add(enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, func(e *historypb.HistoryEvent) {
			e.Attributes = &historypb.HistoryEvent_WorkflowTaskStartedEventAttributes{WorkflowTaskStartedEventAttributes: &historypb.WorkflowTaskStartedEventAttributes{
				ScheduledEventId: scheduled, Identity: "replay-test"}}
		})
		return add(enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, func(e *historypb.HistoryEvent) {
			e.Attributes = &historypb.HistoryEvent_WorkflowTaskCompletedEventAttributes{WorkflowTaskCompletedEventAttributes: &historypb.WorkflowTaskCompletedEventAttributes{
				ScheduledEventId: scheduled, StartedEventId: started, Identity: "replay-test"}}
		})
	}

	add(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{
			WorkflowType: &commonpb.WorkflowType{Name: MaintenanceWorkflow}, TaskQueue: queue,
			WorkflowExecutionTimeout: durationpb.New(30 * time.Minute), WorkflowTaskTimeout: durationpb.New(10 * time.Second),
			Attempt: 1, OriginalExecutionRunId: "run-1", FirstExecutionRunId: "run-1", Identity: "replay-test"}}
	})
	completed := workflowTask()
	var changes []string
	for i, step := range steps {
		if step.change != "" && markers {
			changes = append(changes, step.change+"-1")
			add(enumspb.EVENT_TYPE_MARKER_RECORDED, func(e *historypb.HistoryEvent) {
				e.Attributes = &historypb.HistoryEvent_MarkerRecordedEventAttributes{MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{
					MarkerName: "Version", WorkflowTaskCompletedEventId: completed,
					Details: map[string]*commonpb.Payloads{"change-id": payloads(step.change), "version": payloads(workflow.Version(1))}}}
			})
			sa, err := dc.ToPayload(changes)
			if err != nil {
				t.Fatal(err)
			}
			add(enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, func(e *historypb.HistoryEvent) {
				e.Attributes = &historypb.HistoryEvent_UpsertWorkflowSearchAttributesEventAttributes{UpsertWorkflowSearchAttributesEventAttributes: &historypb.UpsertWorkflowSearchAttributesEventAttributes{
					WorkflowTaskCompletedEventId: completed,
					SearchAttributes:             &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{"TemporalChangeVersion": sa}}}}
			})
		}
		// The SDK names each activity after the id of the event that schedules it.
		next := int64(len(h.Events) + 1)
		scheduled := add(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, func(e *historypb.HistoryEvent) {
			e.Attributes = &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
				ActivityId: strconv.FormatInt(next, 10), ActivityType: &commonpb.ActivityType{Name: step.activity}, TaskQueue: queue,
				StartToCloseTimeout: durationpb.New(5 * time.Minute), HeartbeatTimeout: durationpb.New(time.Minute),
				WorkflowTaskCompletedEventId: completed}}
		})
		started := add(enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, func(e *historypb.HistoryEvent) {
			e.Attributes = &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{
				ScheduledEventId: scheduled, Identity: "replay-test", Attempt: 1}}
		})
		add(enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, func(e *historypb.HistoryEvent) {
			e.Attributes = &historypb.HistoryEvent_ActivityTaskCompletedEventAttributes{ActivityTaskCompletedEventAttributes: &historypb.ActivityTaskCompletedEventAttributes{
				ScheduledEventId: scheduled, StartedEventId: started, Result: payloads(int64(i)), Identity: "replay-test"}}
		})
		completed = workflowTask()
	}
	add(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_WorkflowExecutionCompletedEventAttributes{WorkflowExecutionCompletedEventAttributes: &historypb.WorkflowExecutionCompletedEventAttributes{
			Result: payloads(MaintenanceResult{}), WorkflowTaskCompletedEventId: completed}}
	})
	return h
}

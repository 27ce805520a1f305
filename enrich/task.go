package enrich

// Task is what the lookups of one task depend on, passed down from the worker that
// runs it to every step that asks a source: whose task it is, and the fields its
// waterfall fills, and where what they ask is recorded (Trace). The context passed
// beside it carries the task's cancellation and deadline, nothing else.
type Task struct {
	// Org is the organization whose task it is: the sources are asked with its own
	// vendor keys where it set them (Pipeline.Keys), within its budgets, and what
	// they cost is counted in its spend (Pipeline.Spend); a miss its own key found is
	// remembered for it alone (Pipeline.Misses).
	Org string
	// Fill are the fields the task's waterfall tries to fill (FillLists.For the
	// task's object type; an email lookup's are the person's); empty: the first
	// source that knows the subject gives the answer.
	Fill []string

	// trace gathers what the lookups made through Enrich asked (Trace).
	trace recorder
}

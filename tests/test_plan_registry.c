/* test_plan_registry.c — the planner registry: planners found by name (any case) and by index, unknown names
 * and indexes refused, every planner with its help.  Threading: single-threaded. */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "plan/plan.h"
#include "testutil.h"

static void test_registry(void) {
    CU_ASSERT_PTR_EQUAL(hoff__planner_find("greedy"), &hoff__planner_greedy);
    CU_ASSERT_PTR_EQUAL(hoff__planner_find("GrEeDy"), &hoff__planner_greedy);
    CU_ASSERT_PTR_NULL(hoff__planner_find("greed"));
    CU_ASSERT_PTR_NULL(hoff__planner_find(""));
    CU_ASSERT_PTR_NULL(hoff__planner_find(NULL));
    CU_ASSERT_PTR_EQUAL(hoff__planner_at(0), &hoff__planner_greedy);
    CU_ASSERT_PTR_NULL(hoff__planner_at(-1));
    CU_ASSERT_PTR_NULL(hoff__planner_at(1000));
    CU_ASSERT_PTR_NOT_NULL(hoff__planner_greedy.help);
}

int main(void) {
    static const struct hoff_test tests[] = {
        {"registry", test_registry},
        {NULL, NULL},
    };
    return hoff_test_run("plan_registry", tests);
}
